package death

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// EndedByOwner reclasses a death that the job's owner caused by deleting
// the pod (the guard's rule job-owner) as the job's end, unless the record
// holds evidence of an OOM kill (reason OOMKilled, or the vitals counted
// one), which then classifies it. A job's end says the job's outcome is
// unknown to the cluster (OutcomeUnknown).
func EndedByOwner(r *Record) {
	endedAs(r, JobEnded)
	if Class(r.Class) == JobEnded {
		r.ClassBasis = OutcomeUnknown
	}
}

// OutcomeUnknown is the class basis of every job's end: the owner ends a
// job that succeeded, failed or was cancelled alike. On a cancel, GitLab
// Runner's Kubernetes executor means to stop the script by an exec into
// the build container, but makes it with the job's cancelled context, so
// it never reaches the API server (and its command would be the same as
// every other exec of the job's: the script goes in on stdin); it then
// deletes the pod as after any job. The build container's main process is
// a shell waiting on stdin each time, so its exit is the delete's kill.
// The CI service holds the outcome.
const OutcomeUnknown = "the job's owner deleted the pod while its container still ran, as it does after a success, a failure and a cancel alike: the job's outcome is unknown to the cluster (the CI service has it)"

// JobOverBasis is the class basis of a pod deleted once its fleet said the
// job was over (rule job-over): what still ran was stopped by the delete.
const JobOverBasis = "the pod was deleted once its fleet said the job was over: what still ran was stopped by the delete; the job's outcome is the CI service's"

// RemovedIdle reclasses a death that the fleet caused by deleting the pod
// of a runner with no job (the guard's rule idle) as an idle removal,
// unless the record holds evidence of an OOM kill.
func RemovedIdle(r *Record) { endedAs(r, IdleRemoved) }

// EndedZombie reclasses a death that the end of a named zombie caused (the
// guard's rule zombie, or its fleet's end of it) as zombie-ended, saying what the leader named it,
// unless the record holds evidence of an OOM kill.
func EndedZombie(r *Record) {
	endedAs(r, ZombieEnded)
	if Class(r.Class) == ZombieEnded && r.Zombie != nil {
		r.ClassBasis = fmt.Sprintf("the leader named the runner a zombie (%s) at %s: alive, but its fleet's objects showed it would never run a job",
			r.Zombie.Kind, r.Zombie.Since.UTC().Format(time.RFC3339))
	}
}

// endedAs reclasses a death a deletion caused as c, unless OOM evidence
// (reason OOMKilled, or the vitals counted a kill) classifies it.
func endedAs(r *Record, c Class) {
	switch {
	case Class(r.Class) == CgroupOOM:
	case r.Vitals != nil && r.Vitals.OOMKill > 0:
		r.Class = string(CgroupOOM)
	default:
		r.Class = string(c)
	}
	r.OOMConfirmed = oomConfirmed(Class(r.Class), r.Vitals)
}

// oomSurvived is how long the container must outlive the first OOM kill
// the vitals saw for the kill to be of a process, not of the container: a
// container killed at its limit ends within the kernel's kill, and the
// sidecar dates the kill to its sample, a second apart.
const oomSurvived = 5 * time.Second

// OOMKilled settles an OOM record: one whose container outlived the first
// OOM kill the vitals saw (by oomSurvived) is a process's OOM; one that did
// not is the container's kill at its limit, which ended the runner and the
// job with it (cgroup-oom), and says what that rests on. A deletion that
// began no earlier than such a kill (to the second, as the kubelet dates
// the end) did not end the runner: the record keeps who asked for it,
// not a deletion that ended it.
func OOMKilled(r *Record) {
	if Class(r.Class) != CgroupOOM {
		return
	}
	v := r.Vitals
	dated := v != nil && v.OOMKillAt != nil && r.FinishedAt != nil
	if dated {
		if lived := r.FinishedAt.Sub(v.OOMKillAt.Time); lived >= oomSurvived {
			r.Class = string(ProcessOOM)
			r.ClassBasis = fmt.Sprintf("the vitals saw the first OOM kill at %s, and the container ran on %s after it: the kernel killed a process, not the container",
				v.OOMKillAt.UTC().Format(time.RFC3339), lived.Truncate(time.Second))
			return
		}
	}
	r.ClassBasis = strings.TrimPrefix(r.ClassBasis+"; "+cgroupOOMBasis(r, dated), "; ")
	if r.Deleted && r.DeletedAt != nil && r.FinishedAt != nil && !r.DeletedAt.Before(r.FinishedAt) {
		r.Deleted, r.DeletedAt = false, nil
	}
}

// cgroupOOMBasis says what a cgroup-oom class rests on: the runtime's
// reason or the vitals' count, and whether the vitals dated the kill
// (dated) close enough to the container's end to tell the container's
// kill from a process's.
func cgroupOOMBasis(r *Record, dated bool) string {
	evidence := "the runtime reported OOMKilled"
	if r.Reason != reasonOOMKilled && r.Vitals != nil {
		evidence = fmt.Sprintf("the vitals counted %d OOM kill(s), which outweigh the exit code", r.Vitals.OOMKill)
	}
	if !dated {
		return evidence + "; the vitals dated no kill, so a kill of one process that the container outlived cannot be told from the container's own"
	}
	v := r.Vitals
	return fmt.Sprintf("%s, and the container ended %s after the first OOM kill the vitals saw (at %s), too soon to have outlived it: the kill ended the container, and the job with it",
		evidence, max(r.FinishedAt.Sub(v.OOMKillAt.Time), 0).Truncate(time.Second), v.OOMKillAt.UTC().Format(time.RFC3339))
}

// TimedOut reclasses a job's end by its owner as job-timeout when the
// owner's delete came within timeoutMargin of the pod's own deadline:
// GitLab's manager deletes the pod when the job's timeout passes, a
// second or two before the pod's activeDeadlineSeconds (which GitLab sets
// to that timeout) would have.
func TimedOut(pod *corev1.Pod, r *Record) {
	dl, ok := runnerpod.PodDeadline(pod)
	if Class(r.Class) != JobEnded || !ok || r.DeletedAt == nil || r.DeletedAt.Time.Before(dl.Add(-timeoutMargin)) {
		return
	}
	r.Class = string(JobTimeout)
	r.ClassBasis = fmt.Sprintf("the job's owner deleted the pod at %s, %s before its deadline (activeDeadlineSeconds %d from its start): the job's timeout, which the owner enforces by the delete",
		r.DeletedAt.UTC().Format(time.RFC3339), max(dl.Sub(r.DeletedAt.Time), 0).Truncate(time.Second), *pod.Spec.ActiveDeadlineSeconds)
}

// timeoutMargin is how long before the pod's deadline an owner's delete
// still counts as the job's timeout.
const timeoutMargin = 10 * time.Second

// oomConfirmed says what the vitals say of an OOM-shaped death: a kill
// counted in the reading (the runner container's own cgroup when it was
// seen) confirms it; no kill counted anywhere in the pod on cgroup v2,
// which counts at the pod level, refutes it. On v1 the kernel counts a kill
// only in the victim's own cgroup, which the runtime may remove before the
// sidecar reads it, and a container's own cgroup can go unread on either:
// there a zero count proves nothing.
func oomConfirmed(c Class, v *v1alpha1.Vitals) *bool {
	if v == nil || (c != CgroupOOM && c != SigKill) {
		return nil
	}
	podKills := v.OOMKill
	if v.Pod != nil {
		podKills = v.Pod.OOMKill
	}
	switch {
	case v.OOMKill > 0:
		return ptr.To(true)
	case v.Cgroup == "v2" && podKills == 0:
		return ptr.To(false)
	}
	return nil
}

// WithNode adds the node's state at the death to r and lets it change the
// class where it explains the death: a runner signalled or removed because
// its pod was deleted while its node was being taken away (a drain,
// Karpenter, the cluster autoscaler) is node-disrupted, and one removed
// with no end reported from a lost node is node-lost. Classes read from
// stronger evidence (an OOM kill, an eviction, the job's owner) stay.
func WithNode(r *Record, s *v1alpha1.NodeState) {
	r.NodeState = s
	c := Class(r.Class)
	killed := c == SigTerm || c == SigKill || c == ExternalKill || c == DeletedRunning
	oom := r.OOMConfirmed != nil && *r.OOMConfirmed
	if !killed || oom || !(r.Deleted || r.Disruption != nil) {
		return
	}
	if why := takenAway(s); why != "" {
		r.Class, r.ClassBasis = string(NodeDisrupted), "the pod was deleted while "+why
		r.OOMConfirmed = oomConfirmed(NodeDisrupted, r.Vitals)
		return
	}
	if why := lostNode(s); why != "" && c == DeletedRunning {
		r.Class, r.ClassBasis = string(NodeLost), "the pod was removed with no end reported while "+why
	}
}

// takenAway says how the node was being taken away, or "".
func takenAway(s *v1alpha1.NodeState) string {
	switch {
	case s == nil:
		return ""
	case slices.Contains(s.Taints, TaintKarpenterDisrupted):
		return "Karpenter was removing the node (taint " + TaintKarpenterDisrupted + ")"
	case slices.Contains(s.Taints, TaintAutoscalerDelete):
		return "the cluster autoscaler was removing the node (taint " + TaintAutoscalerDelete + ")"
	case s.Deleting:
		return "the Node object was being deleted"
	case slices.Contains(s.Taints, corev1.TaintNodeOutOfService):
		return "the node was marked out of service"
	// The node-lifecycle notices (Kubernetes 1.38's NodeLifecycleConditions,
	// which a drainer or a maintenance planner sets): more telling than
	// the cordon that comes with them.
	case slices.Contains(s.Conditions, ConditionDrainInProgress+"=True"):
		return "the node was being drained (condition " + ConditionDrainInProgress + ")"
	case slices.Contains(s.Conditions, ConditionMaintenancePlanned+"=True"):
		return "maintenance was planned for the node (condition " + ConditionMaintenancePlanned + ")"
	case slices.Contains(s.Taints, corev1.TaintNodeUnschedulable):
		return "the node was cordoned (a drain)"
	}
	return ""
}

// lostNode says how the node was lost, or "". A Node object that is gone
// proves nothing here: pod GC marks the pods of a deleted Node itself
// (DeletionByPodGC), and a pod bound to a name no Node ever had was never
// run by a kubelet.
func lostNode(s *v1alpha1.NodeState) string {
	switch {
	case s == nil:
		return ""
	case slices.Contains(s.Taints, corev1.TaintNodeUnreachable):
		return "the node was unreachable"
	case slices.Contains(s.Conditions, "Ready=False"), slices.Contains(s.Conditions, "Ready=Unknown"):
		return "the node was not ready"
	}
	return ""
}
