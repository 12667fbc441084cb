//go:build e2e

package api

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// An identity the API server authenticates: a ServiceAccount's token,
// minted by TokenRequest (bound to a pod when one is given), as a runner or
// a manager holds it, with no impersonation by the suite's admin.
type identity struct {
	user string
	cfg  *rest.Config
}

// serviceAccountIn creates the ServiceAccount ns/name if absent and returns
// its username.
func serviceAccountIn(t *testing.T, ns, name string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := admin.Create(context.Background(), sa); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	return "system:serviceaccount:" + ns + ":" + name
}

// token mints, as minter, a token of ServiceAccount ns/name bound to pod
// (none when nil): the API server then adds the pod's name and UID to the
// user info it authenticates from the token.
func token(t *testing.T, minter kubernetes.Interface, ns, name string, pod *corev1.Pod) identity {
	t.Helper()
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
	if pod != nil {
		tr.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	got, err := minter.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name, tr, metav1.CreateOptions{})
	require.NoError(t, err, "minting a token of %s/%s", ns, name)
	cfg := rest.AnonymousClientConfig(adminCfg)
	cfg.BearerToken = got.Status.Token
	cfg.WarningHandler = rest.NoWarnings{}
	return identity{user: "system:serviceaccount:" + ns + ":" + name, cfg: cfg}
}

// wearing is id impersonating user, as `edit` may impersonate the
// ServiceAccounts of its namespace (no extras: impersonating those takes
// "impersonate" on userextras, which no built-in role grants).
func (id identity) wearing(user string) identity {
	cfg := rest.CopyConfig(id.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return identity{user: user, cfg: cfg}
}

func (id identity) client(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(id.cfg, client.Options{Scheme: scheme.Scheme})
	require.NoError(t, err)
	return c
}

func (id identity) clientset(t *testing.T) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(id.cfg)
	require.NoError(t, err)
	return c
}

// runnerPod is an ARC kubernetes-mode runner pod running as sa: the pod
// its runner's token is bound to.
func runnerPod(t *testing.T, ns, name, sa string) *corev1.Pod {
	t.Helper()
	w := podtest.Plain(ns, name).Running("app")
	w.Spec.ServiceAccountName = sa
	return create(t, nil, w.Obj())
}

// The job-owner rule as the principals who would try it, with real tokens
// through the real API server: a name that `edit` in the runner namespace
// can wear ends no busy job; ARC's runner, acting with its own pod's token,
// ends its own workflow pod and no other; GitLab's manager in a namespace
// of its own ends its build pod, and one in the build pods' namespace ends
// it with its own pod's token, not by its name alone nor with a build pod's.
func TestTheJobOwnerIsNoNameAnEditorCanWear(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, nil)
	const kubeMode = "arc-runner-kube-mode"
	runnerSA := serviceAccountIn(t, ns, kubeMode)
	// ARC's kube-mode Role lets its runner create, exec into and delete
	// pods; edit does too.
	may(t, ns, serviceAccount(runnerSA), "edit")
	reaperUser := serviceAccountIn(t, ns, "orphan-reaper")
	may(t, ns, serviceAccount(reaperUser), "edit")
	reaperID := token(t, cs, ns, "orphan-reaper", nil)

	r1 := runnerPod(t, ns, "arc-r1", kubeMode)
	r2 := runnerPod(t, ns, "arc-r2", kubeMode)
	runner1 := token(t, cs, ns, kubeMode, r1)
	runner2 := token(t, cs, ns, kubeMode, r2)
	// The workflow pod as the hooks create it: by the runner, with its own
	// pod's token, labelled with its runner pod's name.
	workflow := func(t *testing.T) *corev1.Pod {
		pod := create(t, runner1.client(t), running(podtest.ARCWorkflow(ns, "arc-r1"), "job"))
		require.Equal(t, runnerSA, pod.Annotations[runnerpod.CreatedBy], "the injector records the runner")
		return pod
	}

	t.Run("a reaper with edit impersonating the runner's ServiceAccount is refused", func(t *testing.T) {
		pod := workflow(t)
		err := deletePod(reaperID.wearing(runnerSA).client(t), pod)
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
		assert.Contains(t, err.Error(), "its token is bound to no pod")
		assert.True(t, alive(t, pod))
	})
	t.Run("another runner's token, bound to its own pod, is refused", func(t *testing.T) {
		pod := workflow(t)
		err := deletePod(runner2.client(t), pod)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `its token is bound to pod "arc-r2", not to the workflow pod's runner pod "arc-r1"`)
		assert.True(t, alive(t, pod))
		eventually(t, hasEvent(t, pod, corev1.EventTypeWarning, "DeleteRefused", "is named as the job's owner but is a ServiceAccount of the pod's own namespace"), "the Event says why the owner was not taken")
	})
	t.Run("another runner's token may not exec into the workflow pod either", func(t *testing.T) {
		pod := workflow(t)
		err := connectAs(t, runner2.cfg, pod, "exec", "job")
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
		assert.Contains(t, err.Error(), `bound to pod "arc-r2"`)
	})
	t.Run("a job running as the runner's ServiceAccount cannot end another job", func(t *testing.T) {
		pod := workflow(t)
		other := running(podtest.ARCWorkflow(ns, "arc-r2"), "job")
		other.Spec.ServiceAccountName = kubeMode
		job := token(t, cs, ns, kubeMode, create(t, runner2.client(t), other))
		err := deletePod(job.client(t), pod)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `its token is bound to pod "arc-r2-workflow"`)
		assert.True(t, alive(t, pod))
	})
	t.Run("the runner's own pod's token ends its job", func(t *testing.T) {
		pod := workflow(t)
		require.NoError(t, deletePod(runner1.client(t), pod))
		assert.False(t, alive(t, pod))
	})
	t.Run("the runner's own pod's token execs into its workflow pod", func(t *testing.T) {
		pod := workflow(t)
		err := connectAs(t, runner1.cfg, pod, "exec", "job")
		require.Error(t, err, "the suite has no kubelet to connect to")
		assert.NotContains(t, err.Error(), "runnerguard")
	})
	t.Run("edit may mint a token bound to the runner's pod, and so act as that runner (stated in the docs)", func(t *testing.T) {
		pod := workflow(t)
		minted := token(t, reaperID.clientset(t), ns, kubeMode, r1)
		require.NoError(t, deletePod(minted.client(t), pod))
	})

	// GitLab: the suite's manager runs in a namespace of its own.
	require.NoError(t, client.IgnoreAlreadyExists(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gitlab"}})))
	serviceAccountIn(t, "gitlab", "gitlab-manager")
	may(t, ns, serviceAccount(ownerPrincipal), "edit")
	manager := token(t, cs, "gitlab", "gitlab-manager", nil)
	t.Run("GitLab's manager in a namespace of its own ends the job it created", func(t *testing.T) {
		pod := create(t, manager.client(t), running(podtest.GitLab(ns, "build-own-ns"), "build"))
		require.Equal(t, ownerPrincipal, pod.Annotations[runnerpod.CreatedBy])
		require.NoError(t, deletePod(manager.client(t), pod))
	})
	t.Run("a reaper with edit in the runner namespace cannot wear a manager of another", func(t *testing.T) {
		pod := create(t, manager.client(t), running(podtest.GitLab(ns, "build-other"), "build"))
		err := reaperID.wearing(ownerPrincipal).clientset(t).CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{})
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
		assert.Contains(t, err.Error(), `cannot impersonate resource "serviceaccounts"`)
		assert.True(t, alive(t, pod))
	})

	const sameNS = "gitlab-runner"
	sameUser := serviceAccountIn(t, ns, sameNS)
	may(t, ns, serviceAccount(sameUser), "edit")
	inRunnerNS := token(t, cs, ns, sameNS, nil)
	// A manager outside the cluster, or with one long-lived token: the same
	// token creates the build pod, execs into it and deletes it.
	t.Run("GitLab's manager in the build pods' own namespace, with one token bound to no pod, runs and ends the job it created", func(t *testing.T) {
		pod := create(t, inRunnerNS.client(t), running(podtest.GitLab(ns, "build-same-ns"), "build"))
		require.Equal(t, sameUser, pod.Annotations[runnerpod.CreatedBy])
		require.True(t, strings.HasPrefix(pod.Annotations[runnerpod.CreatedWith], "JTI="), "the injector records the token's credential id: %q", pod.Annotations[runnerpod.CreatedWith])
		for _, sub := range []string{"exec", "attach"} {
			err := connectAs(t, inRunnerNS.cfg, pod, sub, "build")
			if err != nil {
				assert.NotContains(t, err.Error(), "runnerguard", "%s into the build container is the job's own work", sub)
			}
		}
		require.NoError(t, deletePod(inRunnerNS.client(t), pod))
		assert.False(t, alive(t, pod))
	})
	t.Run("a reaper with edit minting a new token for that manager is refused, saying what to set", func(t *testing.T) {
		pod := create(t, inRunnerNS.client(t), running(podtest.GitLab(ns, "build-minted"), "build"))
		minted := token(t, reaperID.clientset(t), ns, sameNS, nil)
		err := connectAs(t, minted.cfg, pod, "exec", "build")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "a token minted anew")
		err = deletePod(minted.client(t), pod)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "which anyone granted edit in "+ns+" can impersonate")
		assert.Contains(t, err.Error(), "presets.gitlab.ownerInRunnerNamespace: true")
		assert.True(t, alive(t, pod))
		eventually(t, hasEvent(t, pod, corev1.EventTypeWarning, "DeleteRefused", "run the manager with its own pod's token"), "the Event tells the operator")
	})
	t.Run("a reaper with edit running a pod as that manager's ServiceAccount, with a token bound to it, ends no job the manager created with no pod", func(t *testing.T) {
		pod := create(t, inRunnerNS.client(t), running(podtest.GitLab(ns, "build-decoyed"), "build"))
		require.Equal(t, "", pod.Annotations[runnerpod.CreatedFrom], "created with a token bound to no pod")
		decoy := podtest.Plain(ns, "decoy").Running("app")
		decoy.Spec.ServiceAccountName = sameNS
		decoyed := token(t, reaperID.clientset(t), ns, sameNS, create(t, reaperID.client(t), decoy.Obj()))
		err := deletePod(decoyed.client(t), pod)
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
		assert.Contains(t, err.Error(), "but the pod was created with a token bound to no pod")
		assert.True(t, alive(t, pod))
	})
	t.Run("the pod the creator's token was bound to is recorded, and kept", func(t *testing.T) {
		managerPod := runnerPod(t, ns, "gitlab-runner-0", sameNS)
		inPod := token(t, cs, ns, sameNS, managerPod)
		pod := create(t, inPod.client(t), running(podtest.GitLab(ns, "build-from-pod"), "build"))
		assert.Equal(t, "gitlab-runner-0", pod.Annotations[runnerpod.CreatedFrom])
		pod.Annotations[runnerpod.CreatedFrom] = ""
		err := reaperID.client(t).Update(ctx, pod)
		require.Error(t, err)
		assert.Contains(t, err.Error(), runnerpod.CreatedFrom+" is written once, at CREATE, and never changes")
		require.NoError(t, deletePod(inPod.client(t), pod), "the manager, with its own pod's token, ends the job it created")
	})
	t.Run("the recorded credential cannot be changed after CREATE", func(t *testing.T) {
		pod := create(t, inRunnerNS.client(t), running(podtest.GitLab(ns, "build-keep"), "build"))
		pod.Annotations[runnerpod.CreatedWith] = "JTI=forged"
		err := reaperID.client(t).Update(ctx, pod)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "runnerguard.io/created-with is written once, at CREATE, and never changes")
	})
	// The manager's pod (the GitLab chart's Deployment), and its own pod's
	// token, as the in-cluster client of a pod uses it.
	managerPod := runnerPod(t, ns, "gitlab-runner-7d9f", sameNS)
	managerOwn := token(t, cs, ns, sameNS, managerPod)
	t.Run("GitLab's manager in the build pods' own namespace ends the job it created with its own pod's token", func(t *testing.T) {
		pod := create(t, managerOwn.client(t), running(podtest.GitLab(ns, "build-own-token"), "build"))
		require.NoError(t, deletePod(managerOwn.client(t), pod))
		assert.False(t, alive(t, pod))
	})
	t.Run("a job running as the manager's ServiceAccount, with its build pod's token, cannot end another job", func(t *testing.T) {
		victim := create(t, managerOwn.client(t), running(podtest.GitLab(ns, "build-victim"), "build"))
		w := running(podtest.GitLab(ns, "build-attacker"), "build")
		w.Spec.ServiceAccountName = sameNS
		attacker := create(t, managerOwn.client(t), w)
		job := token(t, cs, ns, sameNS, attacker).client(t)
		// The guard knows a runner pod from its cache of them, which sees a
		// new pod a moment after its creation: wait for it with dry runs,
		// which the guard answers as it would the delete.
		eventually(t, func() bool {
			return job.Delete(ctx, victim, client.DryRunAll) != nil
		}, "the guard sees the attacker's pod as a runner pod")
		err := deletePod(job, victim)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `is bound to pod "build-attacker", which runs a job`)
		assert.True(t, alive(t, victim))
	})
	t.Run("a reaper wearing that manager is refused the same way", func(t *testing.T) {
		pod := create(t, inRunnerNS.client(t), running(podtest.GitLab(ns, "build-worn"), "build"))
		err := deletePod(reaperID.wearing(sameUser).client(t), pod)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "ownerInRunnerNamespace")
		assert.True(t, alive(t, pod))
	})
}

// connectAs opens exec or attach into pod's container with cfg's
// credentials.
func connectAs(t *testing.T, cfg *rest.Config, pod *corev1.Pod, subresource, container string) error {
	t.Helper()
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	req := c.CoreV1().RESTClient().Post().Namespace(pod.Namespace).Resource("pods").Name(pod.Name).SubResource(subresource).
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: []string{"kill", "1"}, Stdout: true}, scheme.ParameterCodec)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return req.Do(ctx).Error()
}
