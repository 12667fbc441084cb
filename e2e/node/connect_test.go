//go:build node

package node

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// withDind is pod with a second long-running container "dind", sized so a
// resize can change it: the shape of ARC's docker daemon or GitLab's
// service containers, which share the job's work volume and run its
// containers.
func withDind(pod *corev1.Pod) *corev1.Pod {
	c := pod.Spec.Containers[0]
	c.Name, c.Args = "dind", []string{"job", "3600"}
	c.Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
	pod.Spec.Containers = append(pod.Spec.Containers, c)
	return pod
}

// mayResize grants p the pods/resize subresource in ns, as a vertical
// autoscaler or a debugging role holds it (edit does not), and waits
// until RBAC lets p resize.
func mayResize(t *testing.T, ns string, p principal) principal {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "resizer", Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "pods/resize"}, Verbs: []string{"get", "update", "patch"}},
	}}
	require.NoError(t, admin.Create(ctx, role))
	parts := strings.Split(p.user, ":")
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: parts[2], Name: parts[3]}
	require.NoError(t, admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "resizer", Namespace: ns},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}, Subjects: []rbacv1.Subject{sa}}))
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: p.user, Groups: p.groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "update", Resource: "pods", Subresource: "resize"}}}
	require.Eventually(t, func() bool {
		got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		return err == nil && got.Status.Allowed
	}, 30*time.Second, 200*time.Millisecond, "RBAC lets %s resize pods in %s", p.user, ns)
	return p
}

// A reaper granted edit reaches a busy runner's job through the pod's other
// container (a docker daemon beside the runner): a process there, a port
// forwarded to it, or its resources shrunk by a principal that may resize.
// Each is refused before the kubelet, which does let an override holder
// in, and the runner's job finishes with the daemon untouched.
func TestAnEditorCannotReachABusyRunnersJobThroughItsOtherContainers(t *testing.T) {
	ns := newNamespace(t)
	editor := withEdit(t, ns, serviceAccount(reaper))
	resizer := mayResize(t, ns, serviceAccount("system:serviceaccount:ci-infra:vpa-updater"))
	pod := start(t, withDind(runnerPod(ns, "busy", "64Mi", "job", "30")))
	ctx := context.Background()

	out, err := editor.kubectl("exec", "-n", ns, pod.Name, "-c", "dind", "--", "kill", "1")
	t.Logf("kubectl exec into dind as %s: %v: %s", reaper, err, out)
	require.Error(t, err, "the exec into dind is refused")
	assert.Contains(t, out, `refused exec into container "dind"`)

	// Refused at the upgrade, so kubectl exits; were it let through it
	// would forward until killed.
	pf, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	flags := []string{"--kubeconfig=" + kubeconfigPath, "--as=" + editor.user}
	for _, g := range editor.groups {
		flags = append(flags, "--as-group="+g)
	}
	b, err := exec.CommandContext(pf, kubectlBin, append(flags, "port-forward", "-n", ns, "pod/"+pod.Name, "2375:2375")...).CombinedOutput()
	t.Logf("kubectl port-forward as %s: %v: %s", reaper, err, b)
	require.NoError(t, pf.Err(), "kubectl port-forward ended on its own")
	assert.Contains(t, string(b), "refused portforward to pod")

	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := &corev1.Pod{}
		require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(pod), got))
		got.Spec.Containers[1].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("10m")
		got.Spec.Containers[1].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("10m")
		return resizer.client(t).SubResource("resize").Update(ctx, got)
	})
	require.Error(t, err, "the resize of dind is refused")
	assert.True(t, apierrors.IsForbidden(err), "403, got %v", err)
	assert.Contains(t, err.Error(), "a busy runner pod resized")

	// The kubelet lets in whom the guard lets in: the cluster's admin holds
	// the override.
	b, err = exec.Command(kubectlBin, "--kubeconfig="+kubeconfigPath, "exec", "-n", ns, pod.Name, "-c", "dind", "--", "sh", "-c", "echo admin was here").CombinedOutput()
	require.NoError(t, err, "the admin's exec into dind: %s", b)
	assert.Contains(t, string(b), "admin was here")

	pod = waitPod(t, pod, "the runner's job to finish", 90*time.Second, func(p *corev1.Pod) bool {
		s := containerStatus(p, "runner")
		return s != nil && s.State.Terminated != nil
	})
	assert.Equal(t, int32(0), containerStatus(pod, "runner").State.Terminated.ExitCode, "the runner finished its job undisturbed")
	d := containerStatus(pod, "dind")
	require.NotNil(t, d.State.Running, "the daemon still runs")
	assert.Zero(t, d.RestartCount)
	assert.Equal(t, "200m", pod.Spec.Containers[1].Resources.Limits.Cpu().String(), "dind kept its CPU")
}
