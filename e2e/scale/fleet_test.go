//go:build scale

package scale

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/fleet/gitlab"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Who acts in the simulated fleet (impersonated, as system:masters so RBAC
// never decides: only runnerguard does).
const (
	poolUser    = "system:serviceaccount:ci:runner-pool"
	gitlabUser  = "system:serviceaccount:gitlab:gitlab-manager"
	reaperUser  = "system:serviceaccount:ci-infra:orphan-reaper"
	drainerUser = "system:serviceaccount:ops:drainer"
	// fleetLabel marks the simulator's runner pods, for its watches.
	fleetLabel = "sim.runnerguard.io/fleet"
	// Annotations the runner-exit Stage reads.
	exitAnnotation   = "sim.runnerguard.io/exit"
	neverAnnotation  = "sim.runnerguard.io/never-start"
	crashAnnotation  = "sim.runnerguard.io/crash"
	reasonAnnotation = "sim.runnerguard.io/reason"
	genericNS        = "fleet-generic"
	gitlabNS         = "fleet-gitlab"
)

// fate is how the simulator ends a runner.
type fate int

const (
	// exits: the job ends and the runner exits on its own (the simulator
	// sets the exit annotation; kwok reports the termination).
	exits fate = iota
	// ownerEnds: GitLab's manager deletes the build pod at the job's end.
	ownerEnds
	// drained: a deliberate drain (override annotation, then eviction).
	drained
	// neverStarts: kwok never starts it (the pod stays Pending) and the
	// reaper removes it: no death to record, no webhook call.
	neverStarts
)

// exitShapes are the natural ends the generic runners cycle through, with
// the class runnerguard must record for each.
var exitShapes = []struct {
	code, reason string
	class        death.Class
}{
	{"0", "Completed", death.CleanExit},
	{"137", "OOMKilled", death.CgroupOOM},
	{"1", "Error", death.ErrorExit},
	{"137", "Error", death.SigKill},
}

// oomShape is exitShapes' OOM kill.
const oomShape = 1

// runner is one simulated runner pod and what the simulator did to it.
type runner struct {
	name, ns string
	uid      types.UID
	node     string
	gitlab   bool
	fate     fate
	shape    int // index into exitShapes, for fate exits
	// restarts: its containers crash once (137, OOMKilled) and run again
	// before the job's end: two deaths, two records.
	restarts bool
	// reaped: the reaper tried to force-delete it while busy (refused).
	reaped bool
	// lost: the baseline's reaper or drain killed it while busy.
	lost bool
	// job: a GitLab build pod's job id; stalls: it stalls at its memory
	// limit (the vitals sidecar not ready) before its OOM kill.
	job    string
	stalls bool
}

// deaths is how many records r must have.
func (r *runner) deaths() int {
	if r.restarts {
		return 2
	}
	return 1
}

// want is the class runnerguard must record for r.
func (r *runner) want() death.Class {
	switch r.fate {
	case ownerEnds:
		return death.JobEnded
	case drained:
		return death.SigTerm
	}
	return exitShapes[r.shape].class
}

// clientAs is a clientset impersonating user.
func clientAs(admin *rest.Config, user string) *kubernetes.Clientset {
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters", "system:authenticated"}}
	cfg.WarningHandler = rest.NoWarnings{}
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit: the burst is the point
	return kubernetes.NewForConfigOrDie(cfg)
}

// podFor builds r's pod: a generic pool's runner or a GitLab build pod.
func podFor(r *runner) *corev1.Pod {
	c := func(name string) corev1.Container {
		return corev1.Container{Name: name, Image: "example.com/" + name + ":1"}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: r.ns, Labels: map[string]string{fleetLabel: "1"}},
		Spec: corev1.PodSpec{NodeName: r.node, RestartPolicy: corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To(int64(30)), Containers: []corev1.Container{c("runner")}},
	}
	if r.fate == neverStarts {
		pod.Annotations = map[string]string{neverAnnotation: "true"}
	}
	if r.gitlab {
		pod.Spec.InitContainers = []corev1.Container{c("init-permissions")}
		pod.Spec.Containers = []corev1.Container{c("build"), c("helper"), c("svc-0")}
		// GitLab Runner's Kubernetes executor names the job and its project.
		pod.Labels[gitlab.ProjectIDLabel] = glProject
		pod.Annotations = map[string]string{gitlab.JobIDAnnotation: r.job}
	}
	return pod
}

// parallel runs f on every item with n workers and collects the errors.
func parallel[T any](items []T, n int, f func(T) error) []error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	ch := make(chan T)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range ch {
				if err := f(it); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for _, it := range items {
		ch <- it
	}
	close(ch)
	wg.Wait()
	return errs
}

// evict evicts r's pod as c.
func evict(ctx context.Context, c *kubernetes.Clientset, r *runner) error {
	return c.PolicyV1().Evictions(r.ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: r.ns}})
}

// evictAsDrain evicts r's pod as c the way kubectl drain does: an
// eviction a budget still refuses (429) is tried again after a pause (a
// second here, kubectl's five), as the override's release of the pod
// from its namespace's budget follows the annotation by the leader's
// reaction time. It returns the last call's round trip and how many
// 429s came first.
func evictAsDrain(ctx context.Context, c *kubernetes.Clientset, r *runner) (time.Duration, int, error) {
	for refused := 0; ; refused++ {
		start := time.Now()
		err := evict(ctx, c, r)
		took := time.Since(start)
		if !apierrors.IsTooManyRequests(err) {
			return took, refused, err
		}
		select {
		case <-ctx.Done():
			return took, refused, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// endJob makes r's runner exit as its shape says (kwok's runner-exit
// Stage acts on the annotations).
func endJob(ctx context.Context, c *kubernetes.Clientset, r *runner) error {
	s := exitShapes[r.shape]
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:%q}}}`, exitAnnotation, s.code, reasonAnnotation, s.reason)
	_, err := c.CoreV1().Pods(r.ns).Patch(ctx, r.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// crash asks kwok to restart r's containers in place once (the
// runner-restart Stage), as an OOM kill of a container with restartPolicy
// OnFailure or a dind sidecar's crash would.
func crash(ctx context.Context, c *kubernetes.Clientset, r *runner) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"137",%q:"OOMKilled"}}}`, crashAnnotation, crashAnnotation+"-reason")
	_, err := c.CoreV1().Pods(r.ns).Patch(ctx, r.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// override sets runnerguard's override annotation, as a deliberate drain
// does before it evicts.
func override(ctx context.Context, c *kubernetes.Clientset, r *runner) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"node maintenance"}}}`, runnerpod.AllowDelete)
	_, err := c.CoreV1().Pods(r.ns).Patch(ctx, r.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// since is the time elapsed from t, rounded for the report.
func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }

// kindExits is the kind of a runner whose job ended and which exited on
// its own with 0: a job that ends normally.
const kindExits = "exits on its own, 0"

// kind is what happened to r, for the report's requests per job by kind.
func (r *runner) kind() string {
	switch {
	case r.fate == ownerEnds:
		return "GitLab build pod ended by its manager"
	case r.fate == drained:
		return "drained: evictions refused, then override + eviction"
	case r.reaped:
		return "reaper's force-delete refused, then exits"
	case r.restarts:
		return "restarts in place once, then exits"
	case r.stalls:
		return "GitLab build pod stalls, then OOM-killed (told)"
	case exitShapes[r.shape].class != death.CleanExit:
		return "exits on its own, abnormally (told)"
	}
	return kindExits
}
