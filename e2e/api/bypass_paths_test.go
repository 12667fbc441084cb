//go:build e2e

package api

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/refusal"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// busyRefused is what the guard's refusal of a busy generic runner's
// delete says.
func busyRefused(pod *corev1.Pod) string {
	return `runner container "runner" of pod ` + pod.Namespace + "/" + pod.Name
}

// ownedBy is a busy generic runner whose controller is owner.
func ownedBy(ns, name string, owner client.Object, kind string) *corev1.Pod {
	pod := busyRunner(ns, name)
	gvk := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: kind}
	if kind == "Job" {
		gvk = schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: kind}
	}
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: kind, Name: owner.GetName(), UID: owner.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	return pod
}

// A reaper with edit can do anything Kubernetes lets it do to a busy
// runner's owners: shorten its Job's deadline, scale its ReplicaSet to
// none, delete either with any propagation. Each leaves the pod's end to a
// controller (the Job, ReplicaSet and garbage collectors), whose delete
// of the busy pod the guard refuses as it refuses the reaper's: none of
// them is exempt. An orphaning delete lets the garbage collector remove
// the pod's owner reference, and the pod stays protected.
func TestNoOwnerOrControllerOfABusyRunnerEndsItsJob(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, nil)
	reaperSA := may(t, ns, serviceAccount(reaper), "edit")
	gc := may(t, ns, serviceAccount(config.GarbageCollector), "edit")
	jobController := may(t, ns, serviceAccount("system:serviceaccount:kube-system:job-controller"), "edit")
	rsController := may(t, ns, serviceAccount("system:serviceaccount:kube-system:replicaset-controller"), "edit")

	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "runners"}},
		Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "runner", Image: "example.com/runner:1"}}},
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "runner-job"}, Spec: batchv1.JobSpec{Template: *template.DeepCopy()}}
	require.NoError(t, admin.Create(ctx, job))
	always := template.DeepCopy()
	always.Spec.RestartPolicy = corev1.RestartPolicyAlways
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "runner-rs"}, Spec: appsv1.ReplicaSetSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: template.Labels}, Template: *always,
	}}
	require.NoError(t, admin.Create(ctx, rs))
	ofJob := create(t, nil, ownedBy(ns, "of-job", job, "Job"))
	ofRS := create(t, nil, ownedBy(ns, "of-rs", rs, "ReplicaSet"))
	reaperC := reaperSA.client(t)

	t.Run("the job controller's delete after a reaper shortened the Job's deadline is refused", func(t *testing.T) {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"activeDeadlineSeconds":1}}`))
		require.NoError(t, reaperC.Patch(ctx, job.DeepCopy(), patch), "a Job's deadline is Kubernetes' to allow")
		err := deletePod(jobController.client(t), ofJob, client.Preconditions{UID: &ofJob.UID})
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "403, not %v", err)
		assert.Contains(t, err.Error(), busyRefused(ofJob))
		assert.True(t, alive(t, ofJob))
	})
	t.Run("the replicaset controller's delete after a reaper scaled the ReplicaSet to none is refused", func(t *testing.T) {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":0}}`))
		require.NoError(t, reaperC.Patch(ctx, rs.DeepCopy(), patch))
		err := deletePod(rsController.client(t), ofRS)
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "403, not %v", err)
		assert.True(t, alive(t, ofRS))
	})
	t.Run("the garbage collector's delete after a reaper deleted the owner in the background is refused", func(t *testing.T) {
		require.NoError(t, reaperC.Delete(ctx, rs.DeepCopy(), client.PropagationPolicy(metav1.DeletePropagationBackground)))
		// As kube-controller-manager's garbage collector deletes a
		// dependent whose owner is gone: by UID, in the background.
		err := deletePod(gc.client(t), ofRS, client.Preconditions{UID: &ofRS.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "403, not %v", err)
		assert.Contains(t, err.Error(), busyRefused(ofRS))
		assert.True(t, alive(t, ofRS))
	})
	t.Run("an orphaning delete of the owner leaves the pod protected", func(t *testing.T) {
		require.NoError(t, reaperC.Delete(ctx, job.DeepCopy(), client.PropagationPolicy(metav1.DeletePropagationOrphan)))
		// The garbage collector removes the reference, which the policy
		// lets it do; the pod stays a busy runner.
		require.NoError(t, patchMeta(gc.client(t), ofJob, map[string]any{"ownerReferences": nil}))
		err := deletePod(reaperC, ofJob)
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "403, not %v", err)
		assert.True(t, alive(t, ofJob))
		// The suite runs no garbage collector to finish the orphaning.
		got := &batchv1.Job{}
		require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(job), got))
		got.Finalizers = nil
		require.NoError(t, admin.Update(ctx, got))
	})
}

// What a reaper with edit cannot reach at all: RBAC refuses it before any
// admission. The death records and deletion notes (read only), a pod's
// binding, the kubelet's own API through nodes/proxy (exec there would
// need no pods/exec), and the Node (a NoExecute taint or the Node's
// deletion ends its pods through exempt principals). And the connections
// it may open are refused into the vitals sidecar of a busy runner as
// into the runner.
func TestAReaperReachesNoRecordNodeOrSidecar(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, nil)
	reaperSA := may(t, ns, serviceAccount(reaper), "edit")
	c := reaperSA.client(t)
	busy := create(t, nil, busyRunner(ns, "busy"))
	nodeName := busy.Spec.NodeName

	record := func(kind string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(kind))
		u.SetNamespace(ns)
		u.SetName("some-record")
		return u
	}
	raw := kubernetes.NewForConfigOrDie(impersonated(reaperSA)).CoreV1().RESTClient()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
	taint := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"taints":[{"key":"reap","effect":"NoExecute"}]}}`))
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: busy.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-other"}}
	// Authorization comes before the object is looked up: a 404 here
	// would mean RBAC let the reaper through.
	for name, try := range map[string]func() error{
		"delete a death record": func() error { return c.Delete(ctx, record("RunnerDeath")) },
		"patch a death record": func() error {
			return c.Patch(ctx, record("RunnerDeath"), client.RawPatch(types.MergePatchType, []byte(`{"spec":{}}`)))
		},
		"delete death records at once": func() error { return c.DeleteAllOf(ctx, record("RunnerDeath"), client.InNamespace(ns)) },
		"write a record's reports": func() error {
			return c.Status().Patch(ctx, record("RunnerDeath"), client.RawPatch(types.MergePatchType, []byte(`{"status":{}}`)))
		},
		"create a deletion note": func() error { u := record("RunnerDeletion"); return c.Create(ctx, u) },
		"delete a deletion note": func() error { return c.Delete(ctx, record("RunnerDeletion")) },
		"bind the pod to another node": func() error {
			return raw.Post().Namespace(ns).Resource("pods").Name(busy.Name).SubResource("binding").Body(mustJSON(t, binding)).Do(ctx).Error()
		},
		"exec through the kubelet's API": func() error {
			return raw.Get().AbsPath("/api/v1/nodes", nodeName, "proxy", "exec", ns, busy.Name, "runner").Param("command", "kill").Do(ctx).Error()
		},
		"taint the node NoExecute": func() error { return c.Patch(ctx, node.DeepCopy(), taint) },
		"delete the node":          func() error { return c.Delete(ctx, node.DeepCopy()) },
	} {
		t.Run("a reaper with edit cannot "+name, func(t *testing.T) {
			err := try()
			require.Error(t, err)
			assert.True(t, apierrors.IsForbidden(err), "RBAC's 403, not %v", err)
			assert.Contains(t, err.Error(), `is forbidden: User "`+reaper+`" cannot `, "refused by RBAC, before any admission")
		})
	}
	t.Run("a reaper's exec into a busy runner's vitals sidecar is refused", func(t *testing.T) {
		require.True(t, slices.ContainsFunc(busy.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == runnerpod.VitalsContainer }),
			"the injector added the vitals sidecar")
		err := connect(t, reaperSA, busy, "exec", runnerpod.VitalsContainer)
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "403, not %v", err)
		assert.Contains(t, err.Error(), `refused exec into container "`+runnerpod.VitalsContainer+`"`)
	})
	assert.True(t, alive(t, busy))
}

// impersonated is the rest config of p.
func impersonated(p principal) *rest.Config {
	cfg := rest.CopyConfig(adminCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: p.user, Groups: p.groups}
	cfg.WarningHandler = rest.NoWarnings{}
	return cfg
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return raw
}

// A node's kubelet, with the rights the system:node role gives (the Node
// authorizer narrows them further, to its own pods and Node): it deletes
// and evicts no busy runner through the API server, and cannot write,
// through the status it may write, a signal the guard trusts. What it
// may write (its runners' states) it is trusted with: it runs them.
func TestAKubeletEndsNoBusyRunnerThroughTheAPIServer(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, nil)
	kubelet := nodeIdentity("node-e2e")
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-node-"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: kubelet.user}}}
	require.NoError(t, admin.Create(ctx, crb))
	t.Cleanup(func() { _ = admin.Delete(context.Background(), crb) })
	grantedNode := authorizationv1.ResourceAttributes{Verb: "patch", Resource: "pods", Subresource: "status", Namespace: ns}
	eventually(t, func() bool {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: kubelet.user, Groups: kubelet.groups, ResourceAttributes: &grantedNode}}
		got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		return err == nil && got.Status.Allowed
	}, "RBAC lets the node write pod status")
	c := kubelet.client(t)
	busy := create(t, nil, busyRunner(ns, "busy"))
	scaleSet := create(t, nil, running(podtest.ARCScaleSet(ns, "arc"), "runner"))

	t.Run("its delete of a busy runner on its node is refused", func(t *testing.T) {
		err := deletePod(c, busy)
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "403, not %v", err)
		assert.Contains(t, err.Error(), busyRefused(busy))
	})
	t.Run("its eviction of a busy runner on its node is answered 429", func(t *testing.T) {
		err := evict(c, busy, false)
		assert.True(t, apierrors.IsTooManyRequests(err), "429, not %v", err)
	})
	statusMeta := func(pod *corev1.Pod, meta map[string]any) error {
		raw := mustJSON(t, map[string]any{"metadata": meta})
		return c.Status().Patch(ctx, pod.DeepCopy(), client.RawPatch(types.MergePatchType, raw))
	}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		meta    map[string]any
		refused string
	}{
		{"it cannot set the override through the status", busy, annotations(runnerpod.AllowDelete, "node says so"), overrideRefused},
		{"it cannot drop the runner label through the status", busy, labels(runnerpod.RunnerLabel, nil), "only runnerguard may change the label " + runnerpod.RunnerLabel},
		{"it cannot change a runner's preset through the status", scaleSet, labels(arcscaleset.Label, nil), scaleSetLabel},
		{"it cannot erase the refusals kept on the pod", busy, annotations("runnerguard.io/refusals", `{"v":1,"entries":[]}`), "only runnerguard may write runnerguard.io/refusals"},
	} {
		t.Run(tc.name, func(t *testing.T) { requireRefusedByPolicy(t, statusMeta(tc.pod, tc.meta), tc.refused) })
	}
	t.Run("it cannot delete its Node", func(t *testing.T) {
		err := c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: busy.Spec.NodeName}})
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "403, not %v", err)
	})
	assert.True(t, alive(t, busy))
	assert.True(t, alive(t, scaleSet))
}

// metadataFull is what the policy says when a runner pod's metadata would
// leave no room for runnerguard's records.
const metadataFull = "a runner pod's labels, annotations and finalizers may not grow past"

// metadataBytes counts a pod's labels, annotations and finalizers as the
// policy does.
func metadataBytes(pod *corev1.Pod) int {
	n := 0
	for _, m := range []map[string]string{pod.Labels, pod.Annotations} {
		for k, v := range m {
			n += len(k) + len(v)
		}
	}
	for _, f := range pod.Finalizers {
		n += len(f)
	}
	return n
}

// A reaper with edit may write any label or annotation the guard does not
// trust. Filled to the API server's annotation limit, a busy runner's pod
// would take no refusal, so the reaper's own would never be kept: the
// policy keeps room for runnerguard's records, counted in bytes.
func TestAReaperCannotCrowdItsRefusalOffThePod(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, nil)
	reaperSA := may(t, ns, serviceAccount(reaper), "edit")
	c := reaperSA.client(t)
	busy := create(t, nil, busyRunner(ns, "busy"))
	const padKey = "example.com/pad"
	room := func() int {
		cur := &corev1.Pod{}
		require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(busy), cur))
		n := refusal.MaxPodMetadataBytes - metadataBytes(cur) - len(padKey)
		require.Positive(t, n, "the pod's metadata is under the bound")
		return n
	}

	t.Run("past the room kept for runnerguard's records, a pod's metadata may not grow", func(t *testing.T) {
		requireRefusedByPolicy(t, patchMeta(c, busy, annotations(padKey, strings.Repeat("x", room()+1))), metadataFull)
		// Two bytes a character: counted in bytes, as the API server does.
		requireRefusedByPolicy(t, patchMeta(c, busy, annotations(padKey, strings.Repeat("é", room()/2+1))), metadataFull)
	})
	t.Run("filled up to it, the reaper's refusal is still kept on the pod", func(t *testing.T) {
		require.NoError(t, patchMeta(c, busy, annotations(padKey, strings.Repeat("x", room()))))
		err := connect(t, reaperSA, busy, "exec", "runner")
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "403, not %v", err)
		eventually(t, func() bool {
			got := &corev1.Pod{}
			require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(busy), got))
			l, err := refusal.Parse(got.Annotations[refusal.Annotation])
			return err == nil && slices.ContainsFunc(l.Entries, func(e v1alpha1.Refusal) bool { return e.By == reaper && e.Verb == "exec" })
		}, "the reaper's exec is kept on the pod")
		requireRefusedByPolicy(t, patchMeta(c, busy, labels("example.com/more", "x")), metadataFull)
	})
	t.Run("shrinking is always allowed", func(t *testing.T) {
		require.NoError(t, patchMeta(c, busy, annotations(padKey, nil)))
	})
	assert.True(t, alive(t, busy))
}
