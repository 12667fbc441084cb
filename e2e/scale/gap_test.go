//go:build scale

package scale

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/config"
)

// The gap: the leader is killed (SIGKILL: its lease stays until it expires,
// as after a crash or a lost node) and, before the other replica leads, pod
// GC force-deletes busy runners' pods and runners whose jobs ended in the
// gap. No replica's recorder sees those removals as they happen: the next
// leader has them from its own watch of removals (recorder.Gap).

// inGap reports whether r is one of the gap path's runners.
func (k *kills) inGap(r *runner) bool {
	return slices.Contains(k.gapBusy, r) || slices.Contains(k.gapEnded, r)
}

// killLeader kills the leading replica without letting it hand its lease
// over, and reaps it.
func killLeader(t *testing.T, leader *apitest.Server) {
	t.Helper()
	if err := syscall.Kill(leader.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	leader.Stop()
}

// strikeGap runs the gap path once the leader is dead: the ended runners'
// jobs end, the busy runners' pods are force-deleted, and once kwok has
// ended the others their pods are too; all as pod GC. It notes whether the
// other replica led before the last removal (a removal it saw as leader is
// no gap's).
func (k *kills) strikeGap(ctx context.Context, t *testing.T, workers int, other *apitest.Server) {
	t.Helper()
	start := time.Now()
	if errs := parallel(k.gapEnded, workers, func(r *runner) error { return endJob(ctx, k.admin, r) }); len(errs) > 0 {
		t.Fatalf("%d job ends in the gap failed, first: %v", len(errs), errs[0])
	}
	podGC := clientAs(k.cfg, config.PodGC)
	forceDelete := func(r *runner) error {
		return podGC.CoreV1().Pods(r.ns).Delete(ctx, r.name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	}
	errs := parallel(k.gapBusy, workers, forceDelete)
	apitest.Until(ctx, t, 2*time.Minute, "kwok to end the gap's runners", func() bool { return k.inPhase(ctx, k.gapEnded, corev1.PodSucceeded) == len(k.gapEnded) })
	errs = append(errs, parallel(k.gapEnded, workers, forceDelete)...)
	if len(errs) > 0 {
		t.Fatalf("%d force-deletes in the gap failed, first: %v", len(errs), errs[0])
	}
	k.gapRemoved = len(k.gapBusy) + len(k.gapEnded)
	k.gapTook = since(start)
	k.gapLedBefore = isLeader(other)
}

// awaitGap waits for the gap's runners' records (a miss is scored, not
// fatal here).
func (k *kills) awaitGap(ctx context.Context, t *testing.T, obs *observer) {
	t.Helper()
	rs := append(append([]*runner{}, k.gapBusy...), k.gapEnded...)
	d := scaled(2*time.Minute, len(rs), 100*time.Millisecond)
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, d, true, func(context.Context) (bool, error) {
		return obs.recordsOf(rs) >= len(rs), nil
	}); err != nil {
		t.Logf("after %s, %d of the gap's %d runners have a record", d, obs.recordsOf(rs), len(rs))
	}
}
