package death

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/internal/deletion"
)

// Class is the kind of death, from the classes' table in docs/design.
type Class string

// The classes of death.
const (
	CleanExit    Class = "clean-exit"    // exit 0: the runner quit on its own
	CgroupOOM    Class = "cgroup-oom"    // reason OOMKilled, whatever the exit code
	SigKill      Class = "sigkill"       // 137: SIGKILL from inside or the runtime
	SigTerm      Class = "sigterm"       // 143 or signal 15: deletion or drain
	ExternalKill Class = "external-kill" // a literal 9: the sandbox torn down from outside
	Crash        Class = "crash"         // 139 segfault, 134 abort
	ErrorExit    Class = "error-exit"    // the runner's own failure code
	NodeEviction Class = "node-eviction" // pod reason Evicted: node pressure
	NodeLost     Class = "node-lost"     // the node or its kubelet vanished
	// DeletedRunning extends the table: the pod was removed at once (grace
	// 0) while its runner still ran, so no terminated state may ever be
	// reported for it.
	DeletedRunning Class = "deleted-running"
	// JobEnded: the job's owner (GitLab's runner manager, ARC's runner for
	// its workflow pod) deleted the pod to end the job, and that delete is
	// what stopped the container (a shell waiting on stdin, tail -f): the
	// job's end, not a death, its outcome unknown to the cluster
	// (OutcomeUnknown). OOM evidence still wins over it.
	JobEnded Class = "job-ended"
	// IdleRemoved: the fleet removed a runner that had no job (an ARC
	// runner whose EphemeralRunner never named one, removed on scale-down;
	// a legacy ARC runner after its unregistration), and that delete is what
	// stopped it: neither a death nor a job's end. OOM evidence still wins.
	IdleRemoved Class = "idle-removed"
	// JobFailed: a part of a job of several parts (a Tekton step, a
	// Buildkite command; fleet.Traits.OneJob) ended with its own failure
	// code, neither a signal nor a kill: the job's result (a failing test,
	// a cancel its agent carried out), which its CI service shows, not a
	// death.
	JobFailed Class = "job-failed"
	// ProcessOOM: the kernel OOM-killed a process of the runner's (a job's
	// step, a child), and the container lived on after the kill until it
	// ended otherwise (the owner's delete): the container itself was not
	// killed at its limit.
	ProcessOOM Class = "process-oom"
	// JobTimeout: the pod's activeDeadlineSeconds ran out (GitLab sets it
	// to the job's timeout): pod reason DeadlineExceeded.
	JobTimeout Class = "job-timeout"
	// ProbeKill: the runner was killed (SIGTERM or SIGKILL from outside)
	// while its pod was not being deleted or disrupted, and it has a
	// liveness probe: the kubelet killed it for failing the probe. The
	// kubelet writes no probe reason into the status (only Events, which
	// anyone with events create can forge), so this is an inference, said
	// in the record's ClassBasis.
	ProbeKill Class = "probe-kill"
	// StorageEviction: the kubelet evicted the pod for outgrowing its own
	// ephemeral-storage limit (a container's, the pod's, or an emptyDir's
	// sizeLimit): the job's disk use, not node pressure.
	StorageEviction Class = "storage-eviction"
	// NodeDisrupted: the runner was ended because its node was being taken
	// away: a drain, Karpenter's or the cluster autoscaler's removal, a
	// Node deleted, a graceful node shutdown.
	NodeDisrupted Class = "node-disrupted"
	// Preempted: the scheduler preempted the pod for a higher-priority one.
	Preempted Class = "preempted"
	// ZombieEnded: the runner was a zombie (the leader named it: alive, but
	// its fleet's objects showed it would never run a job), and its end
	// was let through for that (the guard's rule zombie): no job was lost
	// with it, but its fleet made one that could never work, which an
	// operator looks at. The record's Zombie names the kind.
	ZombieEnded Class = "zombie-ended"
)

// Abnormal reports whether the class is a death an operator must look at:
// every class but the runner's own clean exit, the job's normal end and an
// idle runner's removal by its fleet.
func (c Class) Abnormal() bool {
	return c != CleanExit && c != JobEnded && c != IdleRemoved && c != JobFailed
}

// ReasonContainerStatusUnknown is the kubelet's terminated reason for a
// container it no longer finds: its exit code (137) and message are the
// kubelet's placeholders, not the container's.
const ReasonContainerStatusUnknown = "ContainerStatusUnknown"

// Pod status reasons set by the kubelet and the node lifecycle controller.
const (
	reasonEvicted                = "Evicted"
	reasonNodeLost               = "NodeLost"
	reasonOOMKilled              = "OOMKilled"
	reasonContainerStatusUnknown = ReasonContainerStatusUnknown
	reasonDeadlineExceeded       = "DeadlineExceeded"
	// reasonTerminated is the pod reason of the kubelet's graceful node
	// shutdown.
	reasonTerminated = "Terminated"
	// reasonDeletionByPodGC is the DisruptionTarget condition's reason pod
	// GC sets on an orphaned pod (its node is gone) before it deletes it.
	reasonDeletionByPodGC = "DeletionByPodGC"
	// reasonPreemption: the scheduler preempted the pod.
	reasonPreemption = "PreemptionByScheduler"
	// reasonTerminationByKubelet: the kubelet took the pod down (an
	// eviction, a graceful node shutdown).
	reasonTerminationByKubelet = "TerminationByKubelet"
)

// disruptedBy reports whether the pod carries a true DisruptionTarget
// condition with the reason given (the control plane's note of why it is
// taking the pod down).
func disruptedBy(pod *corev1.Pod, reason string) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == reason {
			return true
		}
	}
	return false
}

// Classify names the death of a runner container that ended with t, on pod.
// Pod-level causes (eviction, a lost node) come first: they explain the
// container's exit code, not the other way round.
func Classify(pod *corev1.Pod, container string, t *corev1.ContainerStateTerminated) Class {
	c, _ := classify(pod, container, t, endingOf(pod))
	return c
}

// classify is Classify with the basis of a class that is not read from the
// runner's terminated state alone, and the pod's deletion as e knows it: a
// disruption a deletion carries out counts only when that deletion ended
// the runner (disruption.go).
func classify(pod *corev1.Pod, container string, t *corev1.ContainerStateTerminated, e ending) (Class, string) {
	switch {
	case pod.Status.Reason == reasonEvicted:
		if EvictedFor(pod.Status.Message) == "ephemeral-storage limit" {
			return StorageEviction, "the kubelet's eviction message: " + head(pod.Status.Message, maxNoteBytes)
		}
		return NodeEviction, ""
	case pod.Status.Reason == reasonNodeLost:
		return NodeLost, ""
	case pod.Status.Reason == reasonDeadlineExceeded:
		return JobTimeout, ""
	case pod.Status.Reason == reasonTerminated && disruptedBy(pod, reasonTerminationByKubelet):
		return NodeDisrupted, "the kubelet shut the pod down with its node: " + head(pod.Status.Message, maxNoteBytes)
	case t == nil && e.disruptionEnded(pod, reasonDeletionByPodGC):
		// Pod GC removes the pods of a Node object that is gone, with no
		// kubelet left to report their containers' end.
		return NodeLost, ""
	case t == nil && e.disruptionEnded(pod, reasonPreemption):
		return Preempted, ""
	case t == nil:
		return DeletedRunning, ""
	case t.Reason == reasonOOMKilled:
		// An OOM kill of a child can leave exit code 0 with OOMKilled.
		return CgroupOOM, ""
	case t.Reason == reasonContainerStatusUnknown:
		return NodeLost, ""
	case t.ExitCode == 0:
		return CleanExit, ""
	}
	killed := t.ExitCode == 137 || t.ExitCode == 143 || Signal(t) == 15
	switch {
	case killed && e.disruptionEnded(pod, reasonPreemption):
		return Preempted, ""
	case killed && probeKilled(pod, container, t):
		return ProbeKill, "inferred: the container has a liveness probe and was killed from outside while its pod was neither being deleted nor disrupted; the kubelet states no probe failure in the pod's status"
	case t.ExitCode == 137:
		return SigKill, ""
	case t.ExitCode == 143 || Signal(t) == 15:
		return SigTerm, ""
	case t.ExitCode == 9:
		return ExternalKill, ""
	case t.ExitCode == 139 || t.ExitCode == 134:
		return Crash, ""
	}
	return ErrorExit, ""
}

// probeKilled reports whether a kill of container that ended with t has
// the shape of the kubelet's liveness-probe kill: the container has a
// liveness probe, and its pod carried no DisruptionTarget and was not being
// deleted when it ended (a deletion's SIGTERM is the deletion's).
func probeKilled(pod *corev1.Pod, container string, t *corev1.ContainerStateTerminated) bool {
	if !HasLivenessProbe(pod, container) || disruption(pod) != nil {
		return false
	}
	began, deleting := deletion.Start(pod)
	return !deleting || t.FinishedAt.Time.Before(began)
}

// HasLivenessProbe reports whether the pod's container has a liveness probe.
func HasLivenessProbe(pod *corev1.Pod, container string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == container {
			return c.LivenessProbe != nil
		}
	}
	return false
}

// Signal is the signal that ended the container: the runtime's report when
// it gives one, else decoded from a shell-style exit code above 128.
func Signal(t *corev1.ContainerStateTerminated) int32 {
	if t == nil {
		return 0
	}
	if t.Signal != 0 {
		return t.Signal
	}
	if t.ExitCode > 128 && t.ExitCode < 128+65 {
		return t.ExitCode - 128
	}
	return 0
}

// podReason is the pod's status reason when it is one Classify reads.
func podReason(pod *corev1.Pod) string {
	switch r := pod.Status.Reason; r {
	case reasonEvicted, reasonNodeLost, reasonDeadlineExceeded, reasonTerminated:
		return r
	}
	return ""
}

// CausedByDeletion reports whether the runner ended after its pod's
// deletion began: the deletion (SIGTERM, then SIGKILL) is what ended it.
// The deletion began a grace period before the deletionTimestamp.
func CausedByDeletion(pod *corev1.Pod, r Record) bool {
	began, ok := deletion.Start(pod)
	return ok && r.FinishedAt != nil && !r.FinishedAt.Time.Before(began)
}
