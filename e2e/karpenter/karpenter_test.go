//go:build karpenter

package karpenter

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// The three setups, each in a namespace and a NodePool of its own.
const (
	noMarks     = "none"
	staticMarks = "static"
	busyMarks   = "runnerguard"
)

// instanceType is the one kwok instance type every NodePool may launch
// (4 CPUs, 3900m allocatable after the provider's kube-reserved): with
// runnerCPU each, four runners fill a node and a fifth does not fit, so
// where a runner can go is the same in every setup.
const (
	instanceType = "c-4x-amd64-linux"
	runnerCPU    = "900m"
	perNode      = 4
)

// A node's role: what its four runners do once they are placed.
type role int

const (
	// goesIdle: two idle runners and two short jobs; once the short jobs
	// end it holds idle runners only.
	goesIdle role = iota
	// staysBusy: two short jobs and two long ones.
	staysBusy
	// mixed: one idle runner, one short job, two long ones.
	mixed
	roles
)

func (r role) String() string { return [...]string{"goes idle", "stays busy", "mixed"}[r] }

// jobs is what each role's four runners do.
var jobs = [roles][perNode]job{
	goesIdle:  {idle, idle, short, short},
	staysBusy: {short, short, long, long},
	mixed:     {idle, short, long, long},
}

type job int

const (
	idle job = iota
	short
	long
)

// runner is one runner pod and what the scenario did with it.
type runner struct {
	name, node string
	uid        types.UID
	job        job
	// busy while its job runs: from its assignment to its end.
	busy bool
	// lost: its pod was gone or going when its job ended.
	lost bool
}

// setup is one of the three, with what was measured of it.
type setup struct {
	name, ns string
	runners  []*runner
	// nodes are the role of each node the runners were placed on.
	nodes map[string]role
	// node-seconds from t0 to t2: held by nodes whose running runners are
	// all idle, by nodes without a running runner, by every node.
	idleOnly, empty, total float64
	// lost busy runners; nodes Karpenter removed; marks left on pods whose
	// job had ended; idle-bound nodes left at t2.
	lost, marksLeft, idleBoundLeft int
	// removed: the nodes Karpenter had removed at t2, by role.
	removed [roles]int
	// consolidated: when the last of its goes-idle nodes went, after t1.
	consolidated time.Duration
}

func TestConsolidation(t *testing.T) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	// KARPENTER_NODES_PER_ROLE nodes of each role per setup;
	// KARPENTER_HOLD is the least time long jobs run on after the short ones
	// end (they run on at least until the busy-following setup's goes-idle
	// nodes are gone, or KARPENTER_WAIT passed).
	perRole := apitest.EnvInt("KARPENTER_NODES_PER_ROLE", 1)
	hold := apitest.EnvDuration("KARPENTER_HOLD", 0)
	// Karpenter weighs consolidation again when a node or a pod's binding
	// changes, and otherwise only every 5 minutes (its state.Cluster's
	// ConsolidationState): a runner's mark taken off after its last pass
	// is seen up to 5 minutes later. So the wait is longer than that, plus
	// the 15 s it validates a command and time for a loaded machine.
	patience := apitest.EnvDuration("KARPENTER_WAIT", 8*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute+hold+patience)
	defer cancel()
	dir := t.TempDir()
	artifacts, err := apitest.Artifacts()
	if err != nil {
		t.Fatal(err)
	}

	crds, err := karpenterCRDs()
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := startCluster(append(crds, apitest.EphemeralRunnerCRD())...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cluster.Stop() }()
	admin := cluster.Client
	var procs []*apitest.Process
	for _, p := range []struct {
		name  string
		start func(*apitest.Cluster, string, string) (*apitest.Process, error)
	}{{"kwok", startKwok}, {"kube-scheduler", startScheduler}, {"karpenter", startKarpenter}} {
		proc, err := p.start(cluster, dir, filepath.Join(artifacts, "karpenter-"+p.name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		defer proc.Stop(ctx)
		procs = append(procs, proc)
	}
	// until is apitest.Until that fails at once when a program the run
	// needs has ended, with its log's end.
	until := func(d time.Duration, what string, cond func() bool) {
		t.Helper()
		apitest.Until(ctx, t, d, what, func() bool {
			for _, p := range procs {
				if err := p.Ended(); err != nil {
					t.Fatal(err)
				}
			}
			return cond()
		})
	}

	cfg := configtest.Enforcing()
	// The vitals sidecar's requests would make the guarded setup's pods
	// larger than the others': every setup's runners must fit the same.
	cfg.Inject.Vitals.Enabled = false
	server, err := apitest.StartServer(ctx, cluster, apitest.ServerOptions{WorkDir: dir, Config: cfg, LogName: "karpenter-runnerguard.log",
		KubeconfigFromEnv: true, Args: []string{"--leader-elect", "--leader-election-namespace=" + apitest.ReleaseNamespace}})
	if err != nil {
		t.Fatal(err)
	}
	defer server.Stop()
	if err := server.Register(ctx, admin, cfg); err != nil {
		t.Fatal(err)
	}

	if err := admin.Create(ctx, nodeClass()); err != nil {
		t.Fatal(err)
	}
	setups := []*setup{{name: noMarks}, {name: staticMarks}, {name: busyMarks}}
	for _, s := range setups {
		s.ns, s.nodes = "karp-"+s.name, map[string]role{}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}}
		if s.name == busyMarks {
			ns.Labels = map[string]string{runnerpod.EnabledNamespaceLabel: "true"}
		}
		if err := admin.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
		if err := admin.Create(ctx, nodePool(s.name)); err != nil {
			t.Fatal(err)
		}
	}

	// The runners: every pod pending until Karpenter launches nodes for
	// them and the scheduler binds them, four to a node.
	created := time.Now()
	for _, s := range setups {
		for i := range perRole * int(roles) * perNode {
			r := &runner{name: fmt.Sprintf("runner-%03d", i)}
			if r.uid, err = createRunner(ctx, admin, s, r.name); err != nil {
				t.Fatal(err)
			}
			s.runners = append(s.runners, r)
		}
	}
	want := len(setups) * perRole * int(roles) * perNode
	defer func() {
		if t.Failed() {
			t.Logf("at the end: %s; Karpenter's log ends:\n%s", clusterState(ctx, admin), apitest.LogTail(filepath.Join(artifacts, "karpenter-karpenter.log"), 40))
		}
	}()
	until(10*time.Minute, "every runner to run on a node Karpenter launched", func() bool {
		return runningRunners(ctx, admin, setups) == want
	})
	provisioned := time.Since(created)

	// Roles by node: each setup's nodes, in name order, take the roles in
	// turn; a node's runners take its role's jobs.
	for _, s := range setups {
		pods := &corev1.PodList{}
		if err := admin.List(ctx, pods, client.InNamespace(s.ns)); err != nil {
			t.Fatal(err)
		}
		byNode := map[string][]string{}
		for _, p := range pods.Items {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p.Name)
		}
		names := make([]string, 0, len(byNode))
		for n := range byNode {
			names = append(names, n)
		}
		slices.Sort(names)
		for i, n := range names {
			rl := role(i % int(roles))
			s.nodes[n] = rl
			slices.Sort(byNode[n])
			if len(byNode[n]) != perNode {
				t.Fatalf("%s: node %s holds %d runners, want %d", s.name, n, len(byNode[n]), perNode)
			}
			for j, name := range byNode[n] {
				r := s.find(name)
				r.node, r.job = n, jobs[rl][j]
			}
		}
	}

	// t0: the jobs start, as ARC's listener records them.
	var mu sync.Mutex
	t0 := time.Now()
	for _, s := range setups {
		for i, r := range s.runners {
			if r.job == idle {
				continue
			}
			if err := setJob(ctx, admin, s.ns, r.name, int64(1000+i)); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			r.busy = true
			mu.Unlock()
		}
	}
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		sample(ctx, admin, setups, &mu, stop)
	}()
	guarded := setups[2]
	until(time.Minute, "runnerguard's leader to mark every busy runner", func() bool {
		return marked(ctx, admin, guarded, func(r *runner) bool { return r.job != idle }) == guarded.busyCount(&mu)
	})

	// t1: the short jobs end.
	t1 := time.Now()
	finish(ctx, t, admin, setups, short, &mu)
	// The long jobs run on until the busy-following setup's goes-idle
	// nodes are gone (or Karpenter had KARPENTER_WAIT to remove them), and
	// at least KARPENTER_HOLD.
	_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, patience, true, func(context.Context) (bool, error) {
		left := goesIdleLeft(ctx, admin, guarded)
		if left == 0 && guarded.consolidated == 0 {
			guarded.consolidated = time.Since(t1)
		}
		return left == 0 && time.Since(t1) >= hold, nil
	})
	for _, s := range setups {
		s.removed = removedByRole(ctx, admin, s)
		s.idleBoundLeft = perRole - s.removed[goesIdle]
	}
	// t2: the long jobs end; the measurement stops.
	t2 := time.Now()
	close(stop)
	<-sampled
	finish(ctx, t, admin, setups, long, &mu)
	for _, s := range setups {
		for _, r := range s.runners {
			if r.lost {
				s.lost++
			}
		}
	}

	report := reportOf(setups, perRole, provisioned, t2.Sub(t0), t2.Sub(t1))
	fmt.Print(report)
	if err := os.WriteFile(filepath.Join(artifacts, fmt.Sprintf("karpenter-report-%d.txt", perRole)), []byte(report), 0o644); err != nil {
		t.Error(err)
	}

	// What does not depend on the machine's speed: runnerguard loses no
	// busy runner and leaves no mark; Karpenter takes its idle-only nodes
	// and never the static setup's. The none setup is only reported.
	static := setups[1]
	if guarded.lost != 0 {
		t.Errorf("runnerguard: %d busy runners lost, want 0", guarded.lost)
	}
	if guarded.idleBoundLeft != 0 {
		t.Errorf("runnerguard: %d nodes holding only idle runners not consolidated in %s", guarded.idleBoundLeft, patience)
	}
	if static.idleBoundLeft != perRole {
		t.Errorf("static marks: %d of %d nodes holding only idle runners left, want all: Karpenter must not disrupt a node whose pods carry do-not-disrupt", static.idleBoundLeft, perRole)
	}
}

func (s *setup) find(name string) *runner {
	for _, r := range s.runners {
		if r.name == name {
			return r
		}
	}
	panic("no runner " + name)
}

func (s *setup) busyCount(mu *sync.Mutex) int {
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for _, r := range s.runners {
		if r.busy {
			n++
		}
	}
	return n
}

// nodeClass is the KWOKNodeClass every NodePool launches from.
func nodeClass() *unstructured.Unstructured {
	nc := &unstructured.Unstructured{}
	nc.SetAPIVersion("karpenter.kwok.sh/v1alpha1")
	nc.SetKind("KWOKNodeClass")
	nc.SetName("default")
	return nc
}

// nodePool is setup's NodePool: one instance type, on-demand, consolidation
// of empty and underutilized nodes a few seconds after their pods last
// changed, and a budget that lets Karpenter disrupt every node at once.
func nodePool(name string) *unstructured.Unstructured {
	np := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1",
		"kind":       "NodePool",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"template": map[string]any{"spec": map[string]any{
				"requirements": []any{
					map[string]any{"key": corev1.LabelInstanceTypeStable, "operator": "In", "values": []any{instanceType}},
					map[string]any{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []any{"on-demand"}},
				},
				"nodeClassRef": map[string]any{"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
				"expireAfter":  "Never",
			}},
			"disruption": map[string]any{
				"consolidationPolicy": "WhenEmptyOrUnderutilized",
				"consolidateAfter":    "5s",
				"budgets":             []any{map[string]any{"nodes": "100%"}},
			},
		},
	}}
	return np
}

// createRunner creates an ARC scale-set runner: its EphemeralRunner, then
// its pod, owned by it, pinned to setup's NodePool. The static setup's pod
// carries both marks from its creation, as the injector used to add them.
func createRunner(ctx context.Context, c client.Client, s *setup, name string) (types.UID, error) {
	er := apitest.EphemeralRunner(s.ns, name)
	if err := c.Create(ctx, er); err != nil {
		return "", err
	}
	w := podtest.ARCScaleSet(s.ns, name).
		Resources("runner", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(runnerCPU), corev1.ResourceMemory: resource.MustParse("1Gi")}, nil)
	w.UID = ""
	w.OwnerReferences[0].UID = er.GetUID()
	w.Spec.NodeSelector = map[string]string{"karpenter.sh/nodepool": s.name}
	if s.name == staticMarks {
		w.Annotate(runnerpod.KarpenterDoNotDisrupt, "true").Annotate(runnerpod.ClusterAutoscalerSafeEvict, "false")
	}
	pod := w.Obj()
	if err := c.Create(ctx, pod); err != nil {
		return "", err
	}
	return pod.UID, nil
}

// setJob records a job on the runner's EphemeralRunner, as ARC's listener
// does when the Actions service assigns one.
func setJob(ctx context.Context, c client.Client, ns, name string, id int64) error {
	er := apitest.EphemeralRunner(ns, name)
	if err := c.Get(ctx, client.ObjectKeyFromObject(er), er); err != nil {
		return err
	}
	if err := unstructured.SetNestedField(er.Object, id, "status", "jobRequestId"); err != nil {
		return err
	}
	return c.Status().Update(ctx, er)
}

// finish ends the jobs of kind j in every setup and waits until their
// runners have exited; once runnerguard's leader has had the time to take
// its marks off them, it counts the marks left on them, then deletes their
// pods as ARC does once a runner has exited (with its EphemeralRunner).
// Karpenter looks again at a node when a pod on it goes, not when one
// ends.
func finish(ctx context.Context, t *testing.T, c client.Client, setups []*setup, j job, mu *sync.Mutex) {
	t.Helper()
	for _, s := range setups {
		endJobs(ctx, t, c, s, j, mu)
	}
	ended := func(r *runner) bool { return r.job == j && !r.lost }
	apitest.Until(ctx, t, 2*time.Minute, "the runners whose job ended to exit", func() bool {
		for _, s := range setups {
			pods := &corev1.PodList{}
			if err := c.List(ctx, pods, client.InNamespace(s.ns)); err != nil {
				return false
			}
			for _, p := range pods.Items {
				if r := s.find(p.Name); ended(r) && p.UID == r.uid && p.Status.Phase == corev1.PodRunning {
					return false
				}
			}
		}
		return true
	})
	guarded := setups[2]
	apitest.Until(ctx, t, time.Minute, "runnerguard's marks to leave every runner whose job ended", func() bool {
		return marked(ctx, c, guarded, ended) == 0
	})
	for _, s := range setups {
		s.marksLeft += marked(ctx, c, s, ended)
		for _, r := range s.runners {
			if !ended(r) {
				continue
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: r.name}}
			if err := c.Delete(ctx, pod, client.Preconditions{UID: &r.uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				t.Fatal(err)
			}
			if err := c.Delete(ctx, apitest.EphemeralRunner(s.ns, r.name)); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
	}
}

// endJobs ends the jobs of kind j: a runner whose pod is still running
// exits 0 (kwok's runner-exit Stage, asked by annotation); one whose pod is
// gone, going or another pod is lost.
func endJobs(ctx context.Context, t *testing.T, c client.Client, s *setup, j job, mu *sync.Mutex) {
	t.Helper()
	for _, r := range s.runners {
		if r.job != j {
			continue
		}
		pod := &corev1.Pod{}
		err := c.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: r.name}, pod)
		mu.Lock()
		r.busy = false
		mu.Unlock()
		switch {
		case apierrors.IsNotFound(err):
			r.lost = true
			continue
		case err != nil:
			t.Fatal(err)
		case pod.UID != r.uid || pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning:
			r.lost = true
			continue
		}
		patch := client.MergeFrom(pod.DeepCopy())
		pod.Annotations = mergeMap(pod.Annotations, map[string]string{"sim.runnerguard.io/exit": "0", "sim.runnerguard.io/reason": "Completed"})
		if err := c.Patch(ctx, pod, patch); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
}

func mergeMap(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// runningRunners counts the runner pods of every setup that run on a node.
func runningRunners(ctx context.Context, c client.Client, setups []*setup) int {
	n := 0
	for _, s := range setups {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(s.ns)); err != nil {
			return 0
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning {
				n++
			}
		}
	}
	return n
}

// marked counts the runners chosen by which whose pod carries Karpenter's
// do-not-disrupt mark.
func marked(ctx context.Context, c client.Client, s *setup, which func(*runner) bool) int {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(s.ns)); err != nil {
		return -1
	}
	n := 0
	for _, p := range pods.Items {
		for _, r := range s.runners {
			if r.name == p.Name && which(r) && p.Annotations[runnerpod.KarpenterDoNotDisrupt] == "true" {
				n++
			}
		}
	}
	return n
}

// goesIdleLeft counts setup's goes-idle nodes that still exist.
func goesIdleLeft(ctx context.Context, c client.Client, s *setup) int {
	return len(s.runners)/(int(roles)*perNode) - removedByRole(ctx, c, s)[goesIdle]
}

// removedByRole counts setup's nodes that are gone, by role.
func removedByRole(ctx context.Context, c client.Client, s *setup) [roles]int {
	var gone [roles]int
	for name, rl := range s.nodes {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{}); apierrors.IsNotFound(err) {
			gone[rl]++
		}
	}
	return gone
}

// sample adds, every half second until stop, each setup's nodes' time to
// its counters: a node whose running runners are all idle, a node with no
// running runner, every node.
func sample(ctx context.Context, c client.Client, setups []*setup, mu *sync.Mutex, stop <-chan struct{}) {
	last := time.Now()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		nodes := &corev1.NodeList{}
		if err := c.List(ctx, nodes); err != nil {
			continue
		}
		now := time.Now()
		dt := now.Sub(last).Seconds()
		last = now
		for _, s := range setups {
			pods := &corev1.PodList{}
			if err := c.List(ctx, pods, client.InNamespace(s.ns)); err != nil {
				continue
			}
			running, busy := map[string]int{}, map[string]int{}
			mu.Lock()
			for _, p := range pods.Items {
				if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
					continue
				}
				for _, r := range s.runners {
					if r.name == p.Name && r.uid == p.UID {
						running[p.Spec.NodeName]++
						if r.busy {
							busy[p.Spec.NodeName]++
						}
					}
				}
			}
			mu.Unlock()
			for _, n := range nodes.Items {
				if n.Labels["karpenter.sh/nodepool"] != s.name {
					continue
				}
				s.total += dt
				switch {
				case running[n.Name] == 0:
					s.empty += dt
				case busy[n.Name] == 0:
					s.idleOnly += dt
				}
			}
		}
	}
}
