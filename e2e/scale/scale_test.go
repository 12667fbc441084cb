//go:build scale

package scale

import (
	"context"
	"fmt"

	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/e2e/internal/registration"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
)

func TestFleet(t *testing.T) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	nRunners, nNodes, workers := apitest.EnvInt("SCALE_RUNNERS", 30), apitest.EnvInt("SCALE_NODES", 10), apitest.EnvInt("SCALE_WORKERS", 8)
	nOthers := apitest.EnvInt("SCALE_OTHER_PODS", 0)
	ctx, cancel := context.WithTimeout(context.Background(), scaled(40*time.Minute, nRunners+nOthers/10, 300*time.Millisecond))
	defer cancel()
	dir := t.TempDir()
	artifacts, err := apitest.Artifacts()
	if err != nil {
		t.Fatal(err)
	}

	cluster, auditLog, err := startCluster(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cluster.Stop() }()
	if err := installEphemeralRunnerCRD(cluster.Config); err != nil {
		t.Fatal(err)
	}
	cp, err := findControlPlane(cluster)
	if err != nil {
		t.Fatal(err)
	}
	// The disruption controller weighs the budgets, in both runs: its CPU
	// and work queue are the budgets' cost to kube-controller-manager.
	dcm, err := startDisruption(cluster, dir, filepath.Join(artifacts, "scale-disruption.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer dcm.Stop(ctx)
	cp.dcm = dcm
	kw, err := apitest.StartKwok(cluster, dir, filepath.Join(artifacts, "scale-kwok.log"), nodeLabel+"=kwok")
	if err != nil {
		t.Fatal(err)
	}
	defer kw.Stop(ctx)
	cp.kwok = kw.Pid()

	admin := cluster.Clientset
	for _, ns := range []string{genericNS, gitlabNS, genericNS + baseSuffix, gitlabNS + baseSuffix} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, optedIn(ns), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	nodes := make([]string, nNodes)
	for i := range nNodes {
		nodes[i] = nodeName(i)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName(i), Labels: map[string]string{nodeLabel: "kwok"}}}
		if _, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	apitest.Until(ctx, t, scaled(3*time.Minute, nNodes, 100*time.Millisecond), "kwok to make every node Ready", func() bool { return readyNodes(ctx, admin) == nNodes })
	obs, err := startObserver(ctx, cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	// The cluster's other workloads, before any runner and before
	// runnerguard: it starts against a cluster of their size.
	others, err := createOthers(ctx, cp, nOthers, nodes, []string{genericNS, gitlabNS}, apitest.EnvInt("SCALE_OTHER_WORKERS", 32))
	if err != nil {
		t.Fatal(err)
	}
	f := fleet{cfg: cluster.Config, admin: admin, crAdmin: cluster.Client, obs: obs, cp: cp, auditLog: auditLog, runners: nRunners, nodes: nNodes, workers: workers}
	// The baseline: the same simulation in namespaces of its own, before
	// runnerguard is installed; its pods are removed before it starts.
	base := simulate(ctx, t, f, baseSuffix)
	if err := clearNamespaces(ctx, admin, 32, genericNS+baseSuffix, gitlabNS+baseSuffix); err != nil {
		t.Fatal(err)
	}

	cfg := configtest.Enforcing()
	if n := apitest.EnvInt("SCALE_RECORDS_PER_NAMESPACE", 0); n > 0 {
		// Retention that bites during the run: the collector removes the
		// oldest records of pods that may still show their deaths, and a
		// leader that takes over must not write those again.
		cfg.Records.MaxPerNamespace = n
		cfg.Records.CollectInterval = metav1.Duration{Duration: 5 * time.Second}
	}
	// Reports on, to GitLab and a sink, for both runner namespaces.
	rep, err := startReporting(ctx, admin, &cfg, genericNS, gitlabNS)
	if err != nil {
		t.Fatal(err)
	}
	defer rep.close()
	// The chart's flags: leader election in the release namespace, the
	// in-cluster config's client (no client-side rate limit).
	server, err := apitest.StartServer(ctx, cluster, apitest.ServerOptions{WorkDir: dir, Config: cfg, LogName: "scale-runnerguard-1.log",
		KubeconfigFromEnv: true, Args: []string{"--leader-elect", "--leader-election-namespace=" + apitest.ReleaseNamespace}})
	if err != nil {
		t.Fatal(err)
	}
	defer server.Stop()
	replica, err := server.Replica(ctx, "scale-runnerguard-2.log")
	if err != nil {
		t.Fatal(err)
	}
	defer replica.Stop()
	if err := registerAsChart(ctx, server, cluster.Client, cfg); err != nil {
		t.Fatal(err)
	}
	apitest.Until(ctx, t, 2*time.Minute, "a leader", func() bool { return isLeader(server) || isLeader(replica) })
	// The kill paths that need cluster machinery (kills_test.go) strike
	// before the fleet's plan; only pod GC's removal of a lost node's pods
	// runs on into it.
	replicas := [2]*apitest.Server{server, replica}
	kills := newKills(cluster, dir, filepath.Join(artifacts, "scale-kcm.log"), max(3, nRunners/30), nodeName(nNodes-1))
	defer kills.stop(ctx)
	kills.setup(ctx, t, workers)
	kills.strike(ctx, t, workers, obs, server, replicas)
	f.replicas, f.kills, f.artifacts, f.rep = replicas, kills, artifacts, rep
	run := simulate(ctx, t, f, "")
	run.others, run.base = others, base
	report := run.report() + run.compare()
	fmt.Print(report)
	if err := os.WriteFile(filepath.Join(artifacts, fmt.Sprintf("scale-report-%d.txt", nRunners)), []byte(report), 0o644); err != nil {
		t.Error(err)
	}
	asserts(t, run)
}

// simulate runs the fleet's life once in the runner namespaces suffixed
// suffix: with runnerguard when f.replicas are set, else the baseline
// (every kill succeeds: the busy runners it takes are counted lost, and
// there are no records to wait for or score).
func simulate(ctx context.Context, t *testing.T, f fleet, suffix string) *run {
	t.Helper()
	nRunners, nNodes, workers, admin, obs, auditLog := f.runners, f.nodes, f.workers, f.admin, f.obs, f.auditLog
	replicas, server := f.replicas, f.replicas[0]
	guarded := server != nil
	genericNS, gitlabNS := genericNS+suffix, gitlabNS+suffix
	var err error
	// The plan: every third runner a GitLab build pod its manager ends; the
	// generic runners on the first 10% of the nodes are drained; the rest
	// exit on their own in the four shapes.
	drainedNodes := max(1, nNodes/10)
	rs := make([]*runner, nRunners)
	for i := range rs {
		r := &runner{name: fmt.Sprintf("runner-%05d", i), ns: genericNS, node: nodeName(i % nNodes), shape: i % len(exitShapes)}
		switch {
		case i%3 == 2:
			r.gitlab, r.ns, r.fate, r.job = true, gitlabNS, ownerEnds, jobOf(i)
			if i%12 == 11 {
				// A quarter of the build pods stall at their limit and are
				// OOM-killed: told on their commits while and after.
				r.fate, r.shape, r.stalls = exits, oomShape, true
			}
			if f.rep != nil {
				f.rep.addJob(r)
			}
		case i%nNodes < drainedNodes:
			r.fate = drained
		}
		rs[i] = r
	}
	never := make([]*runner, max(2, nRunners/50))
	for i := range never {
		never[i] = &runner{name: fmt.Sprintf("never-%05d", i), ns: genericNS, node: nodeName(i % nNodes), fate: neverStarts}
	}
	pool, gitlab := clientAs(f.cfg, poolUser), clientAs(f.cfg, gitlabUser)
	reaper, drainer := clientAs(f.cfg, reaperUser), clientAs(f.cfg, drainerUser)

	run := &run{runners: nRunners, nodes: nNodes}
	run.cp[0] = f.cp.take(ctx)
	run.before = take(replicas)
	if errs := parallel(append(slices.Clone(rs), never...), workers, func(r *runner) error {
		c := pool
		if r.gitlab {
			c = gitlab
		}
		start := time.Now()
		pod, err := c.CoreV1().Pods(r.ns).Create(ctx, podFor(r), metav1.CreateOptions{})
		run.took(&run.createRTT, start)
		if err == nil {
			r.uid = pod.UID
		}
		return err
	}); len(errs) > 0 {
		t.Fatalf("%d creates failed, first: %v", len(errs), errs[0])
	}
	run.burst = since(run.before.at)
	apitest.Until(ctx, t, scaled(5*time.Minute, nRunners, 100*time.Millisecond), "kwok to start every runner", func() bool {
		return notRunning(ctx, f.cp.meta, fleetLabel+"=1", genericNS, gitlabNS) == len(never)
	})
	run.burstEnd = take(replicas)
	run.cp[1] = f.cp.take(ctx)
	if guarded {
		if run.burstReqs, err = requestCounts(auditLog, run.before.at, run.burstEnd.at); err != nil {
			t.Fatal(err)
		}
	}

	var exiting, owned, drainedRs, onDrained []*runner
	for _, r := range rs {
		switch r.fate {
		case exits:
			exiting = append(exiting, r)
		case ownerEnds:
			owned = append(owned, r)
		case drained:
			drainedRs = append(drainedRs, r)
		}
		if i := nodeIndex(r.node); i < drainedNodes {
			onDrained = append(onDrained, r)
		}
	}
	// A reaper force-deletes busy runners: every one must be refused.
	victims := exiting[:max(1, len(exiting)/10)]
	for _, r := range victims {
		r.reaped = true
	}
	run.chaos.reaperTried = len(victims)
	_ = parallel(victims, workers, func(r *runner) error {
		start := time.Now()
		err := reaper.CoreV1().Pods(r.ns).Delete(ctx, r.name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		run.took(&run.deleteRTT, start)
		run.count(func(c *chaos) {
			if err == nil {
				c.busyLost++
				r.lost = true
			} else if apierrors.IsForbidden(err) {
				c.reaperRefused++
			}
		})
		return nil
	})
	// A drain of 10% of the nodes: every busy runner there answers 429.
	onDrained = alive(onDrained)
	run.chaos.drainTried = len(onDrained)
	_ = parallel(onDrained, workers, func(r *runner) error {
		start := time.Now()
		err := evict(ctx, drainer, r)
		run.took(&run.evictRTT, start)
		run.count(func(c *chaos) {
			if err == nil {
				c.busyLost++
				r.lost = true
			} else if apierrors.IsTooManyRequests(err) {
				c.drainRefused429++
			}
		})
		return nil
	})

	// A share of GitLab's build pods stall at their memory limit: the
	// leader tells each stall on its job's commit while it lasts.
	var stalling []*runner
	for _, r := range alive(rs) {
		if r.stalls {
			stalling = append(stalling, r)
		}
	}
	if guarded {
		run.stalledNow = stallAll(ctx, t, f, stalling, workers)
	}
	run.stalled = len(stalling)

	// Every fifth exiting runner restarts in place once: a death of its
	// own, recorded apart from the job's end.
	// The baseline's lost runners are gone: the rest of its work is done
	// with those left.
	exiting, owned, drainedRs = alive(exiting), alive(owned), alive(drainedRs)
	var restarting []*runner
	for i, r := range exiting {
		if i%5 == 4 && !r.stalls {
			r.restarts = true
			restarting = append(restarting, r)
		}
	}
	if errs := parallel(restarting, workers, func(r *runner) error { return crash(ctx, admin, r) }); len(errs) > 0 {
		t.Fatalf("%d crashes failed, first: %v", len(errs), errs[0])
	}
	apitest.Until(ctx, t, scaled(5*time.Minute, len(restarting), 100*time.Millisecond), "kwok to restart the crashing runners", func() bool { return obs.restartedIn(restarting) == len(restarting) })
	run.restarted = len(restarting)

	// The reaper removes the runners that never started: allowed, and
	// decided in the API server (matchConditions), so no webhook call.
	var callsBefore, callsAfter float64
	if guarded {
		if callsBefore, err = server.WebhookCalls(registration.GuardPath); err != nil {
			t.Fatal(err)
		}
	}
	if errs := parallel(never, workers, func(r *runner) error {
		return reaper.CoreV1().Pods(r.ns).Delete(ctx, r.name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	}); len(errs) > 0 {
		t.Errorf("%d deletes of never-started runners refused, first: %v", len(errs), errs[0])
	}
	if guarded {
		if callsAfter, err = server.WebhookCalls(registration.GuardPath); err != nil {
			t.Fatal(err)
		}
	}
	run.neverStarted, run.neverCalls = len(never), int(callsAfter-callsBefore)

	// The leader is killed while runner pods are force-deleted (the kill
	// paths' gap) and half of the exiting runners end; the other replica
	// must take over and record them all.
	run.preKill = take(replicas)
	run.killed = run.preKill.leader
	if guarded && run.killed < 0 {
		t.Fatal("no leader before the kill")
	}
	if guarded {
		// What the replicas' memory is made of at the leader's busiest, for
		// pprof.
		for i, s := range replicas {
			role := "follower"
			if i == run.killed {
				role = "leader"
			}
			if err := s.HeapProfile(filepath.Join(f.artifacts, fmt.Sprintf("scale-%s-heap-%d.pprof", role, nRunners))); err != nil {
				t.Logf("heap profile of replica %d: %v", i+1, err)
			}
		}
	}
	if guarded {
		f.kills.awaitLost(ctx, t, obs)
	}
	gapStart := time.Now()
	if guarded {
		killLeader(t, replicas[run.killed])
		f.kills.strikeGap(ctx, t, workers, replicas[1-run.killed])
	}
	batch := exiting[:len(exiting)/2]
	if errs := parallel(batch, workers, func(r *runner) error { return endJob(ctx, admin, r) }); len(errs) > 0 {
		t.Fatalf("%d job ends failed, first: %v", len(errs), errs[0])
	}
	apitest.Until(ctx, t, scaled(5*time.Minute, len(batch), 100*time.Millisecond), "kwok to end the first batch of runners", func() bool { return obs.ended(batch) == len(batch) })
	run.gapDeaths = len(batch)
	if guarded {
		other := replicas[1-run.killed]
		apitest.Until(ctx, t, 3*time.Minute, "the other replica to lead", func() bool { return isLeader(other) })
		run.gap = since(gapStart)
		if err := replicas[run.killed].Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	run.postRestart = take(replicas)

	// The rest of the fleet's work: the other runners end, GitLab's
	// manager ends its jobs, the drain goes on with the override.
	if errs := parallel(exiting[len(exiting)/2:], workers, func(r *runner) error { return endJob(ctx, admin, r) }); len(errs) > 0 {
		t.Fatalf("%d job ends failed, first: %v", len(errs), errs[0])
	}
	run.chaos.ownerTried = len(owned)
	_ = parallel(owned, workers, func(r *runner) error {
		start := time.Now()
		err := gitlab.CoreV1().Pods(r.ns).Delete(ctx, r.name, metav1.DeleteOptions{})
		run.took(&run.allowedRTT, start)
		run.count(func(c *chaos) {
			if err == nil {
				c.ownerAllowed++
			}
		})
		return err
	})
	run.chaos.overrideTried = len(drainedRs)
	_ = parallel(drainedRs, workers, func(r *runner) error {
		err := override(ctx, admin, r)
		refused := 0
		if err == nil {
			var took time.Duration
			took, refused, err = evictAsDrain(ctx, drainer, r)
			run.took(&run.overrideRTT, time.Now().Add(-took))
		}
		run.count(func(c *chaos) {
			c.overrideRetries += refused
			if err == nil {
				c.overrideAllowed++
			}
		})
		return err
	})
	if !guarded {
		run.cp[2] = f.cp.take(ctx)
		return run
	}
	f.kills.finish(ctx, t, obs, replicas)
	run.kills = f.kills
	deaths := 0
	for _, r := range rs {
		deaths += r.deaths()
	}
	apitest.Until(ctx, t, scaled(5*time.Minute, nRunners, 100*time.Millisecond), "a record of every death", func() bool {
		return obs.recordsOf(rs) >= deaths
	})
	if f.rep != nil {
		run.reports = f.rep.reportsTold(ctx, t, rs)
	}
	run.end = take(replicas)
	run.cp[2] = f.cp.take(ctx)
	if run.requests, err = requestCounts(auditLog, run.before.at, run.end.at); err != nil {
		t.Fatal(err)
	}
	if run.byKind, err = requestsByKind(auditLog, run.before.at, run.end.at, rs); err != nil {
		t.Fatal(err)
	}
	if run.budgetCreates, run.budgetDeletes, err = budgetWrites(auditLog, run.before.at, run.end.at); err != nil {
		t.Fatal(err)
	}
	inGap := map[*runner]bool{}
	for _, r := range batch {
		inGap[r] = true
	}
	run.score, run.obs, run.rs = scoreRunners(obs, rs, inGap), obs, rs
	// Every death above was recorded after these pods went: a record of
	// theirs would have arrived by now.
	run.neverRecords = obs.recorded(never)
	return run
}

// asserts are the goals the guarded run must meet.
func asserts(t *testing.T, run *run) {
	t.Helper()
	s, c := run.score, run.chaos
	if run.neverCalls != 0 || run.neverRecords != 0 {
		t.Errorf("never-started runners: %d guard calls and %d records, want none", run.neverCalls, run.neverRecords)
	}
	if s.missed != 0 || s.duplicates != 0 || s.wrongClass != 0 {
		t.Errorf("every death recorded exactly once with its class: missed %d, duplicates %d, wrong class %d %v", s.missed, s.duplicates, s.wrongClass, s.wrong)
	}
	if c.busyLost != 0 || c.reaperRefused != c.reaperTried || c.drainRefused429 != c.drainTried {
		t.Errorf("no busy runner lost: lost %d, reaper refused %d of %d, drain 429 %d of %d", c.busyLost, c.reaperRefused, c.reaperTried, c.drainRefused429, c.drainTried)
	}
	if c.ownerAllowed != c.ownerTried || c.overrideAllowed != c.overrideTried {
		t.Errorf("the fleet's own work goes on: owner deletes %d of %d, override evictions %d of %d", c.ownerAllowed, c.ownerTried, c.overrideAllowed, c.overrideTried)
	}
	// A job's budget is its pod's label: a namespace's budget is created
	// once and never deleted by runnerguard, and a job that ends on its
	// own costs at most 5 writes (its marks on and off, its record, its
	// Event).
	for ns, n := range run.budgetCreates {
		if n > 1 {
			t.Errorf("namespace %s's budget created %d times, want once", ns, n)
		}
	}
	if run.budgetDeletes != 0 {
		t.Errorf("runnerguard deleted %d budgets, want none", run.budgetDeletes)
	}
	if k := run.byKind[kindExits]; k.runners > 0 && float64(k.writes)/float64(k.runners) > 5 {
		t.Errorf("a job that ends on its own: %.2f writes naming its pod, want at most 5; the most one made: %s", float64(k.writes)/float64(k.runners), strings.Join(k.most, ", "))
	}
	if rc := run.reports; rc.glErrors != 0 || rc.sinkErrors != 0 || (run.stalled > 0 && rc.stallsTold == 0) {
		t.Errorf("reports: %d refused by GitLab, %d by the sink; %d stalls, %d told", rc.glErrors, rc.sinkErrors, run.stalled, rc.stallsTold)
	}
	run.kills.check(t)
}
