package recorder

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/presets"

	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Waiting reports why a runner that never ran has not started: its waiting
// reason, or the scheduler's when it has no status yet. ok is false once it
// has run or runs.
func Waiting(pod *corev1.Pod, runner runnerpod.Runner) (container, reason, message string, ok bool) {
	if runnerpod.RunnerStatus(pod, runner.Containers).State != runnerpod.NotStarted {
		return "", "", "", false
	}
	container = runner.Containers[0]
	if presets.Of(runner).Traits().GatedByInit && initRunning(pod) {
		// A pool's runner is gated by a poller init container that waits
		// for a job: an idle runner, not a stuck one.
		return "", "", "", false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == container && cs.State.Waiting != nil {
			return container, cs.State.Waiting.Reason, cs.State.Waiting.Message, true
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return container, c.Reason, c.Message, true
		}
	}
	return container, "Pending", "", true
}

// checkStuck warns once about a runner that has waited past StuckAfter, and
// comes back when it would cross the threshold.
func (w *Watcher) checkStuck(ctx context.Context, pod *corev1.Pod, runner runnerpod.Runner) (ctrl.Result, error) {
	container, reason, message, waiting := Waiting(pod, runner)
	if !waiting || pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		w.setStuck(client.ObjectKeyFromObject(pod), "")
		return ctrl.Result{}, nil
	}
	waited := w.Now().Sub(pod.CreationTimestamp.Time)
	if waited < w.StuckAfter {
		return ctrl.Result{RequeueAfter: w.StuckAfter - waited}, nil
	}
	if w.setStuck(client.ObjectKeyFromObject(pod), reason) {
		// One Event per waiting reason, written with the reason read now:
		// a runner that moves from PodInitializing to ErrImagePull gets a
		// second report that says so.
		note := fmt.Sprintf("runner %q has not started after %s: %s", container, waited.Truncate(time.Second), reason)
		if message != "" {
			note += ": " + message
		}
		w.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, death.ReasonStuck, "Wait", "%s", truncate(note, 1024))
		logf.FromContext(ctx).Info("runner stuck", "container", container, "reason", reason, "waited", waited.Truncate(time.Second).String())
	}
	// Come back now and then: the reason may change (ErrImagePull to
	// ImagePullBackOff), and every pod update brings the pod back sooner.
	return ctrl.Result{RequeueAfter: w.StuckAfter}, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// setStuck records (reason != "") or forgets the stuck runner of pod, and
// refreshes the gauge when that changes anything: most reconciles are of
// runners that were never stuck. It reports whether anything changed.
func (w *Watcher) setStuck(pod types.NamespacedName, reason string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stuck[pod] == reason {
		return false
	}
	was := w.stuck[pod]
	if reason == "" {
		delete(w.stuck, pod)
	} else {
		w.stuck[pod] = reason
	}
	// Only the two series the change moves are set, each to its count: a
	// reset and recount would show a scrape in between no stuck runner.
	for _, r := range []string{was, reason} {
		if r == "" {
			continue
		}
		n := 0
		for p, pr := range w.stuck {
			if p.Namespace == pod.Namespace && pr == r {
				n++
			}
		}
		if n == 0 {
			stuckGauge.DeleteLabelValues(pod.Namespace, r)
		} else {
			stuckGauge.WithLabelValues(pod.Namespace, r).Set(float64(n))
		}
	}
	return true
}

// initRunning reports whether a regular init container (not a native
// sidecar, which runs for the pod's life) is running.
func initRunning(pod *corev1.Pod) bool {
	sidecar := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		sidecar[c.Name] = c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
	}
	for _, cs := range pod.Status.InitContainerStatuses {
		if cs.State.Running != nil && !sidecar[cs.Name] {
			return true
		}
	}
	return false
}
