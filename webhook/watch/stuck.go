package watch

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/webhook/runnerpod"
)

var stuckGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "runnerguard_runner_pods_stuck",
	Help: "Runner pods whose runner container has waited longer than the threshold to start, by namespace and waiting reason.",
}, []string{"namespace", "reason"})

// RegisterMetrics registers the watcher's gauge on reg.
func RegisterMetrics(reg prometheus.Registerer) error { return reg.Register(stuckGauge) }

// Waiting reports why a runner that never ran has not started: its waiting
// reason, or the scheduler's when it has no status yet. ok is false once it
// has run or runs.
func Waiting(pod *corev1.Pod, runner runnerpod.Runner) (container, reason, message string, ok bool) {
	if runnerpod.RunnerStatus(pod, runner.Containers).State != runnerpod.NotStarted {
		return "", "", "", false
	}
	container = runner.Containers[0]
	if runner.Preset.Name == runnerpod.Generic && initRunning(pod) {
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
	if err := w.Deaths.Stuck(ctx, pod, container, reason, message, waited); err != nil {
		return ctrl.Result{}, err
	}
	w.setStuck(client.ObjectKeyFromObject(pod), reason)
	// Come back now and then: the reason may change (ErrImagePull to
	// ImagePullBackOff) and the gauge should follow it.
	return ctrl.Result{RequeueAfter: w.StuckAfter}, nil
}

// setStuck records (reason != "") or forgets the stuck runner of pod, and
// refreshes the gauge when that changes anything: most reconciles are of
// runners that were never stuck.
func (w *Watcher) setStuck(pod types.NamespacedName, reason string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stuck[pod] == reason {
		return
	}
	if reason == "" {
		delete(w.stuck, pod)
	} else {
		w.stuck[pod] = reason
	}
	stuckGauge.Reset()
	for p, r := range w.stuck {
		stuckGauge.WithLabelValues(p.Namespace, r).Inc()
	}
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
