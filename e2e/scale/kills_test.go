//go:build scale

package scale

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/e2e/internal/registration"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// The kill paths that need cluster machinery: a namespace deleted under
// busy runners (the namespace controller), a lost node (pod GC), an
// autoscaler's scale-down and ARC's controller. Each has its own runners,
// namespace or node, apart from the main fleet's plan.
const (
	doomedNS       = "fleet-doomed"
	arcNS          = "fleet-arc"
	lostNode       = "kwok-lost"
	scaleDownNode  = "kwok-scaledown"
	autoscalerUser = "system:serviceaccount:kube-system:cluster-autoscaler"
)

// expect is a runner of the kill paths and the records it must have.
type expect struct {
	r     *runner
	class death.Class
	n     int    // records: 0 for a death that cannot have one
	by    string // the deleter its records must name, when a note names one
}

// kills is the kill paths' runners and what happened to them.
type kills struct {
	mu      sync.Mutex
	cfg     *rest.Config
	cluster *apitest.Cluster
	dir     string
	kcmLog  string
	kcm     *apitest.Process
	admin   *kubernetes.Clientset
	crAdmin client.Client
	pool    *kubernetes.Clientset
	// The runners: busy in the namespace deleted; busy on the lost node;
	// busy, finished and never-started on the autoscaler's node; ARC's
	// idle and busy.
	doomed, lost, down, arcIdle, arcBusy []*runner
	downFinished, downNever              *runner
	// The gap (gap_test.go): busy runners, and runners whose jobs end,
	// force-deleted while no replica leads.
	gapBusy, gapEnded []*runner
	expects           []expect
	// How many were removed in the gap, in how long, and whether the other
	// replica already led when the last went.
	gapRemoved   int
	gapTook      time.Duration
	gapLedBefore bool

	nsDeleted, nodeDeleted time.Time
	nsGone, podGCGone      time.Duration
	podGCDone              chan struct{}
	// Replica log lines about the deleted namespace: record or Event writes
	// refused as "being terminated" (apierrors' NamespaceTerminatingCause),
	// at the namespace's removal and at the end.
	terminatingAtGone, terminatingAtEnd, nsLinesAtGone, nsLinesAtEnd int
	terminatingSample                                                string
	// The autoscaler's first pass (busy: 429; finished or never started:
	// evicted) and its pass after the jobs ended.
	asBusyTried, as429, asOtherTried, asOtherAllowed, asAfterTried, asAfterAllowed, busyLost int
	// ARC's controller: idle deletes allowed, busy ones refused, finished
	// ones allowed with no guard call.
	arcIdleAllowed, arcBusyTried, arcBusyRefused, arcDoneAllowed, arcDoneCalls int
	// Scored like the main fleet; unrecordable (the deleted namespace's
	// runners, the never-started one) must have no record.
	score, gapScore       score
	unrecordable          int
	lostBy, wrongDeleters []string
}

// newKills plans the kill paths' runners, n of each kind, the deleted
// namespace's and ARC's on node; kube-controller-manager logs to kcmLog.
func newKills(c *apitest.Cluster, dir, kcmLog string, n int, node string) *kills {
	k := &kills{cfg: c.Config, cluster: c, dir: dir, kcmLog: kcmLog, admin: c.Clientset, crAdmin: c.Client, pool: clientAs(c.Config, poolUser)}
	mk := func(prefix, ns, node string, count int) []*runner {
		rs := make([]*runner, count)
		for i := range rs {
			rs[i] = &runner{name: fmt.Sprintf("%s-%04d", prefix, i), ns: ns, node: node}
		}
		return rs
	}
	k.doomed = mk("doomed", doomedNS, node, n)
	k.lost = mk("lost", genericNS, lostNode, n)
	k.down = mk("down", genericNS, scaleDownNode, n)
	k.downFinished = &runner{name: "down-finished", ns: genericNS, node: scaleDownNode}
	k.downNever = &runner{name: "down-never", ns: genericNS, node: scaleDownNode, fate: neverStarts}
	k.arcIdle = mk("arc-idle", arcNS, node, max(2, n/2))
	k.arcBusy = mk("arc-busy", arcNS, node, n)
	for _, r := range k.doomed {
		k.expects = append(k.expects, expect{r: r})
	}
	// Pod GC marks each orphan with a DisruptionTarget condition
	// (DeletionByPodGC) before it deletes it: node-lost. It is exempt, so
	// the API server does not call the guard and no note names it.
	for _, r := range k.lost {
		k.expects = append(k.expects, expect{r: r, class: death.NodeLost, n: 1})
	}
	for _, r := range append(k.down, k.downFinished) {
		k.expects = append(k.expects, expect{r: r, class: death.CleanExit, n: 1})
	}
	k.expects = append(k.expects, expect{r: k.downNever})
	// An idle runner's pod deleted while it runs, its EphemeralRunner never
	// having named a job: the fleet removing an idle runner, neither a
	// death nor a job end (idle-removed), and the guard's note (rule idle)
	// names ARC's controller.
	for _, r := range k.arcIdle {
		k.expects = append(k.expects, expect{r: r, class: death.IdleRemoved, n: 1, by: arcUser})
	}
	for _, r := range k.arcBusy {
		k.expects = append(k.expects, expect{r: r, class: death.CleanExit, n: 1})
	}
	// Removed while its runner ran, by pod GC (exempt: no note), with no
	// DisruptionTarget: deleted-running. The others' jobs end (exit 0).
	k.gapBusy, k.gapEnded = mk("gap-busy", genericNS, node, n), mk("gap-ended", genericNS, node, n)
	for _, r := range k.gapBusy {
		k.expects = append(k.expects, expect{r: r, class: death.DeletedRunning, n: 1})
	}
	for _, r := range k.gapEnded {
		k.expects = append(k.expects, expect{r: r, class: death.CleanExit, n: 1})
	}
	return k
}

// setup creates the kill paths' nodes, namespaces and runners and waits for
// every runner that should run to run.
func (k *kills) setup(ctx context.Context, t *testing.T, workers int) {
	t.Helper()
	for _, name := range []string{lostNode, scaleDownNode} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{nodeLabel: "kwok"}}}
		if _, err := k.admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{doomedNS, arcNS} {
		if _, err := k.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{runnerpod.EnabledNamespaceLabel: "true"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	plain := append(append(append(append(append([]*runner{k.downFinished, k.downNever}, k.doomed...), k.lost...), k.down...), k.gapBusy...), k.gapEnded...)
	errs := parallel(plain, workers, func(r *runner) error {
		pod, err := k.pool.CoreV1().Pods(r.ns).Create(ctx, killPod(r), metav1.CreateOptions{})
		if err == nil {
			r.uid = pod.UID
		}
		return err
	})
	arc := clientAs(k.cfg, arcUser)
	errs = append(errs, parallel(append(append([]*runner{}, k.arcIdle...), k.arcBusy...), workers, func(r *runner) error {
		job := int64(0) // idle: no job assigned
		if slices.Contains(k.arcBusy, r) {
			job = 1001
		}
		return createARCRunner(ctx, k.crAdmin, arc, r, job)
	})...)
	if len(errs) > 0 {
		t.Fatalf("%d creates of the kill paths' runners failed, first: %v", len(errs), errs[0])
	}
	starting := k.starting()
	apitest.Until(ctx, t, 3*time.Minute, "kwok to start the kill paths' runners", func() bool { return k.inPhase(ctx, starting, corev1.PodRunning) == len(starting) })
}

// killPod is r's pod without the fleet's label: the kill paths' pods stay
// out of the main plan's counts (the lost node's pods read Running until pod
// GC removes them); their records are scored apart.
func killPod(r *runner) *corev1.Pod {
	pod := podFor(r)
	delete(pod.Labels, fleetLabel)
	return pod
}

// starting is every kill-path runner kwok starts.
func (k *kills) starting() []*runner {
	var rs []*runner
	for _, e := range k.expects {
		if e.r.fate != neverStarts {
			rs = append(rs, e.r)
		}
	}
	return rs
}

// inPhase counts the runners among rs whose pod is in phase.
func (k *kills) inPhase(ctx context.Context, rs []*runner, phase corev1.PodPhase) int {
	n := 0
	for _, r := range rs {
		if p, err := k.admin.CoreV1().Pods(r.ns).Get(ctx, r.name, metav1.GetOptions{}); err == nil && p.Status.Phase == phase && p.UID == r.uid {
			n++
		}
	}
	return n
}

// gone counts the runners among rs whose pod no longer exists.
func (k *kills) gone(ctx context.Context, rs []*runner) int {
	n := 0
	for _, r := range rs {
		if _, err := k.admin.CoreV1().Pods(r.ns).Get(ctx, r.name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			n++
		}
	}
	return n
}

// strike runs every kill before the fleet's plan, so the plan's figures
// stay its own: the lost node goes first (pod GC quarantines its pods for
// about 40 s before it deletes them, so that wait overlaps the plan), the
// namespace is deleted, the autoscaler evicts every pod of its node, ARC's
// controller deletes its idle runners and tries its busy ones; the busy
// runners' jobs end, ARC deletes the finished pods and the autoscaler
// evicts again. It returns once the namespace is gone and every death but
// the lost node's is recorded.
func (k *kills) strike(ctx context.Context, t *testing.T, workers int, obs *observer, guard *apitest.Server, replicas [2]*apitest.Server) {
	t.Helper()
	k.nodeDeleted = time.Now()
	if err := k.admin.CoreV1().Nodes().Delete(ctx, lostNode, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// kube-controller-manager starts after the node is gone: pod GC's first
	// pass (right after its caches sync; then every 20 s) finds the
	// orphans, and its 40 s quarantine starts there, not up to 20 s later.
	var err error
	if k.kcm, err = startKCM(k.cluster, k.dir, k.kcmLog); err != nil {
		t.Fatal(err)
	}
	// Timed apart from the plan's waits: the moment pod GC removed them.
	k.podGCDone = make(chan struct{})
	go func() {
		defer close(k.podGCDone)
		_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
			return k.gone(ctx, k.lost) == len(k.lost), nil
		})
		k.tally(func() { k.podGCGone = since(k.nodeDeleted) })
	}()
	k.nsDeleted = time.Now()
	if err := k.admin.CoreV1().Namespaces().Delete(ctx, doomedNS, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := endJob(ctx, k.admin, k.downFinished); err != nil {
		t.Fatal(err)
	}
	apitest.Until(ctx, t, 2*time.Minute, "kwok to end the finished runner", func() bool {
		return k.inPhase(ctx, []*runner{k.downFinished}, corev1.PodSucceeded) == 1
	})
	autoscaler := clientAs(k.cfg, autoscalerUser)
	k.asBusyTried = len(k.down)
	_ = parallel(k.down, workers, func(r *runner) error {
		err := evict(ctx, autoscaler, r)
		k.tally(func() {
			if err == nil {
				k.busyLost++
			} else if apierrors.IsTooManyRequests(err) {
				k.as429++
			}
		})
		return nil
	})
	for _, r := range []*runner{k.downFinished, k.downNever} {
		k.asOtherTried++
		if err := evict(ctx, autoscaler, r); err == nil {
			k.asOtherAllowed++
		} else {
			t.Errorf("the autoscaler's eviction of %s: %v", r.name, err)
		}
	}
	arc := clientAs(k.cfg, arcUser)
	_ = parallel(k.arcIdle, workers, func(r *runner) error {
		err := deleteAs(ctx, arc, r)
		k.tally(func() {
			if err == nil {
				k.arcIdleAllowed++
			}
		})
		return nil
	})
	k.arcBusyTried = len(k.arcBusy)
	_ = parallel(k.arcBusy, workers, func(r *runner) error {
		err := deleteAs(ctx, arc, r)
		k.tally(func() {
			if err == nil {
				k.busyLost++
			} else if apierrors.IsForbidden(err) {
				k.arcBusyRefused++
			}
		})
		return nil
	})
	// The jobs end: each runner exits 0 and ARC's listener clears its
	// EphemeralRunner's job.
	if errs := parallel(append(append([]*runner{}, k.down...), k.arcBusy...), workers, func(r *runner) error {
		if err := endJob(ctx, k.admin, r); err != nil {
			return err
		}
		if r.ns == arcNS {
			return clearJob(ctx, k.crAdmin, r)
		}
		return nil
	}); len(errs) > 0 {
		t.Fatalf("%d job ends failed, first: %v", len(errs), errs[0])
	}
	// ARC's controller deletes the finished pods: decided in the API
	// server (matchConditions), no guard call.
	apitest.Until(ctx, t, 2*time.Minute, "kwok to end ARC's busy runners", func() bool { return k.inPhase(ctx, k.arcBusy, corev1.PodSucceeded) == len(k.arcBusy) })
	before, err := guard.WebhookCalls(registration.GuardPath)
	if err != nil {
		t.Fatal(err)
	}
	k.arcDoneAllowed = len(k.arcBusy) - len(parallel(k.arcBusy, workers, func(r *runner) error { return deleteAs(ctx, arc, r) }))
	after, err := guard.WebhookCalls(registration.GuardPath)
	if err != nil {
		t.Fatal(err)
	}
	k.arcDoneCalls = int(after - before)
	// The scale-down goes on once the autoscaler's node has no busy runner.
	apitest.Until(ctx, t, 2*time.Minute, "kwok to end the autoscaler node's runners", func() bool { return k.inPhase(ctx, k.down, corev1.PodSucceeded) == len(k.down) })
	k.asAfterTried = len(k.down)
	k.asAfterAllowed = len(k.down) - len(parallel(k.down, workers, func(r *runner) error { return evict(ctx, autoscaler, r) }))

	apitest.Until(ctx, t, 3*time.Minute, "the namespace controller to remove "+doomedNS, func() bool {
		_, err := k.admin.CoreV1().Namespaces().Get(ctx, doomedNS, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	k.nsGone = since(k.nsDeleted)
	k.terminatingAtGone, k.nsLinesAtGone, k.terminatingSample = grepLogs(replicas)
	var rest []*runner
	want := 0
	for _, e := range k.expects {
		if e.r.node != lostNode && !k.inGap(e.r) {
			rest, want = append(rest, e.r), want+e.n
		}
	}
	apitest.Until(ctx, t, 3*time.Minute, "a record of every kill path's death but the lost node's and the gap's", func() bool { return obs.recordsOf(rest) >= want })
}

// stop ends kube-controller-manager.
func (k *kills) stop(ctx context.Context) {
	if k.kcm != nil {
		k.kcm.Stop(ctx)
	}
}

// tally updates the counters; parallel's workers share them.
func (k *kills) tally(f func()) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f()
}

// awaitLost waits for pod GC to remove the lost node's pods and for their
// records. The fleet's plan calls it before it kills the leader: this path
// measures pod GC, and the gap's own path (gap_test.go) measures removals
// while no replica leads.
func (k *kills) awaitLost(ctx context.Context, t *testing.T, obs *observer) {
	t.Helper()
	select {
	case <-k.podGCDone:
	case <-ctx.Done():
	}
	if k.gone(ctx, k.lost) != len(k.lost) {
		t.Fatalf("pod GC left %d of the lost node's %d pods", len(k.lost)-k.gone(ctx, k.lost), len(k.lost))
	}
	// Not fatal: a record that never comes is a miss the score counts and
	// check fails on, after the rest of the run has been measured.
	d := scaled(3*time.Minute, len(k.lost), 100*time.Millisecond)
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, d, true, func(context.Context) (bool, error) {
		return obs.recordsOf(k.lost) >= len(k.lost), nil
	}); err != nil {
		t.Logf("after %s, %d of the lost node's %d runners have a record", d, obs.recordsOf(k.lost), len(k.lost))
	}
}

// finish waits for pod GC to remove the lost node's pods and for their
// records, then scores every kill path.
func (k *kills) finish(ctx context.Context, t *testing.T, obs *observer, replicas [2]*apitest.Server) {
	t.Helper()
	k.awaitLost(ctx, t, obs)
	k.awaitGap(ctx, t, obs)
	k.terminatingAtEnd, k.nsLinesAtEnd, _ = grepLogs(replicas)
	k.score = k.scoreOf(obs)
}

// scoreOf compares each kill path runner's records with its expectation.
func (k *kills) scoreOf(o *observer) score {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := score{}
	by := map[string]bool{}
	for _, e := range k.expects {
		recs := o.records[e.r.uid]
		if e.n == 0 {
			k.unrecordable += len(recs)
			continue
		}
		for _, sc := range []*score{&s, &k.gapScore} {
			if sc == &k.gapScore && !k.inGap(e.r) {
				continue
			}
			sc.runners += e.n
			sc.once += min(len(recs), e.n)
			sc.missed += max(0, e.n-len(recs))
			sc.duplicates += max(0, len(recs)-e.n)
		}
		for _, rec := range recs {
			if rec.class != string(e.class) {
				s.wrongClass++
				s.wrong = append(s.wrong, fmt.Sprintf("%s/%s: %s, want %s", e.r.ns, e.r.name, rec.class, e.class))
			}
			if e.by != "" && rec.deletedBy != e.by {
				k.wrongDeleters = append(k.wrongDeleters, fmt.Sprintf("%s/%s: deleted by %q, want %q", e.r.ns, e.r.name, rec.deletedBy, e.by))
			}
			if e.r.node == lostNode && !by[rec.deletedBy] {
				by[rec.deletedBy] = true
				k.lostBy = append(k.lostBy, fmt.Sprintf("%q", rec.deletedBy))
			}
		}
	}
	return s
}

// grepLogs counts the replicas' log lines about the deleted namespace:
// those saying it is being terminated, and all that name it; with the
// first of the former as a sample.
func grepLogs(replicas [2]*apitest.Server) (terminating, naming int, sample string) {
	for _, r := range replicas {
		b, err := os.ReadFile(r.LogPath)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, doomedNS) {
				continue
			}
			naming++
			if strings.Contains(line, "being terminated") {
				terminating++
				if sample == "" {
					sample = line[:min(len(line), 400)]
				}
			}
		}
	}
	return terminating, naming, sample
}

// report adds the kill paths' lines to the fleet's report.
func (k *kills) report(p func(string, ...any)) {
	p("")
	p("kill paths (kube-controller-manager: namespace, podgc, garbagecollector controllers, each as its own ServiceAccount):")
	p("  namespace %s deleted with %d busy runners: gone after %s; records of them and of the never-started runner: %d (a terminating namespace takes none)",
		doomedNS, len(k.doomed), k.nsGone, k.unrecordable)
	p("  replica log lines naming %s: %d at its removal, %d at the end; of which \"being terminated\": %d, then %d",
		doomedNS, k.nsLinesAtGone, k.nsLinesAtEnd, k.terminatingAtGone, k.terminatingAtEnd)
	if k.terminatingSample != "" {
		p("    first: %s", k.terminatingSample)
	}
	p("  node %s deleted with %d busy runners: pod GC removed them %s after; their records' deleter: %s",
		lostNode, len(k.lost), k.podGCGone, strings.Join(k.lostBy, ", "))
	p("  autoscaler (%s) on %s: busy evictions %d, answered 429 %d; finished/never-started evictions %d, allowed %d; after the jobs ended %d, allowed %d",
		autoscalerUser, scaleDownNode, k.asBusyTried, k.as429, k.asOtherTried, k.asOtherAllowed, k.asAfterTried, k.asAfterAllowed)
	p("  ARC (%s): idle deletes %d, allowed %d; busy deletes %d, refused %d; finished deletes %d, allowed %d, guard calls %d",
		arcUser, len(k.arcIdle), k.arcIdleAllowed, k.arcBusyTried, k.arcBusyRefused, len(k.arcBusy), k.arcDoneAllowed, k.arcDoneCalls)
	g := k.gapScore
	p("  leader killed (SIGKILL, its lease left to expire): pod GC force-deleted %d busy runners and %d whose jobs ended in the gap, in %s; the other replica led before the last went: %v; recorded exactly once %d of %d, missed %d, duplicates %d",
		len(k.gapBusy), len(k.gapEnded), k.gapTook, k.gapLedBefore, g.once, g.runners, g.missed, g.duplicates)
	s := k.score
	p("  kill-path deaths: %d, recorded exactly once %d, missed %d, duplicates %d, wrong class %d %v, wrong deleter %v; busy lost %d",
		s.runners, s.once, s.missed, s.duplicates, s.wrongClass, s.wrong, k.wrongDeleters, k.busyLost)
}

// check asserts the kill paths' outcome.
func (k *kills) check(t *testing.T) {
	t.Helper()
	s := k.score
	if s.missed != 0 || s.duplicates != 0 || s.wrongClass != 0 || k.unrecordable != 0 || len(k.wrongDeleters) != 0 {
		t.Errorf("kill paths: missed %d, duplicates %d, wrong class %d %v, records of unrecordable deaths %d, wrong deleters %v",
			s.missed, s.duplicates, s.wrongClass, s.wrong, k.unrecordable, k.wrongDeleters)
	}
	if k.busyLost != 0 || k.as429 != k.asBusyTried || k.arcBusyRefused != k.arcBusyTried {
		t.Errorf("kill paths: busy lost %d, autoscaler 429 %d of %d, ARC busy refused %d of %d", k.busyLost, k.as429, k.asBusyTried, k.arcBusyRefused, k.arcBusyTried)
	}
	if k.asOtherAllowed != k.asOtherTried || k.asAfterAllowed != k.asAfterTried || k.arcIdleAllowed != len(k.arcIdle) || k.arcDoneAllowed != len(k.arcBusy) {
		t.Errorf("kill paths' allowed work: autoscaler %d of %d then %d of %d, ARC idle %d of %d, finished %d of %d",
			k.asOtherAllowed, k.asOtherTried, k.asAfterAllowed, k.asAfterTried, k.arcIdleAllowed, len(k.arcIdle), k.arcDoneAllowed, len(k.arcBusy))
	}
	if k.arcDoneCalls != 0 {
		t.Errorf("ARC's deletes of finished runners: %d guard calls, want none", k.arcDoneCalls)
	}
}
