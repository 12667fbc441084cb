package death

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/vitals/record"
	"github.com/runnerguard/runnerguard/webhook/runnerpod"
)

// Record is one runner's death, as logged and (later) put in Events.
type Record struct {
	Namespace   string `json:"namespace"`
	Pod         string `json:"pod"`
	UID         string `json:"uid"`
	Node        string `json:"node,omitempty"`
	Preset      string `json:"preset"`
	Container   string `json:"container"`
	ContainerID string `json:"containerID,omitempty"`
	// ExitCode is nil when the runner had not ended when the record was
	// made (DeletedRunning).
	ExitCode   *int32     `json:"exitCode,omitempty"`
	Signal     int32      `json:"signal,omitempty"`
	Reason     string     `json:"reason,omitempty"`
	Class      Class      `json:"class"`
	StartedAt  *time.Time `json:"startedAt,omitempty"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	Restarts   int32      `json:"restarts,omitempty"`
	// DeletedBy is the requester of the DELETE that the record was made
	// at, or that caused the death.
	DeletedBy string `json:"deletedBy,omitempty"`
	// Deleted: the runner ended because its pod was being deleted. With
	// no DeletedBy, the delete was not reviewed by the guard (an exempt
	// principal, or the guard was down).
	Deleted bool `json:"deleted,omitempty"`
	// Vitals is the sidecar's final reading, when it left one.
	Vitals *record.Final `json:"vitals,omitempty"`
	// OOMConfirmed says what the vitals say of an OOM-shaped death
	// (cgroup-oom, sigkill): true when they counted an oom_kill, false when
	// they counted none on cgroup v2; nil without vitals, for other classes,
	// and for no count on v1, where a kill can go uncounted.
	OOMConfirmed *bool `json:"oomConfirmed,omitempty"`
}

// Key identifies a death: one record per pod UID and container start. A
// container that never got an ID (it failed to be created) is told apart by
// its name and end time.
func (r Record) Key() string {
	if r.ContainerID != "" {
		return r.UID + "/" + r.ContainerID
	}
	end := ""
	if r.FinishedAt != nil {
		end = r.FinishedAt.UTC().Format(time.RFC3339)
	}
	return r.UID + "/" + r.Container + "@" + end
}

// New builds the record of runner's death on pod from st, the runner's
// status (whose Terminated is nil when the runner was still running).
func New(pod *corev1.Pod, runner runnerpod.Runner, st runnerpod.Status, deletedBy string) Record {
	r := Record{
		Namespace: pod.Namespace, Pod: pod.Name, UID: string(pod.UID), Node: pod.Spec.NodeName,
		Preset: string(runner.Preset.Name), DeletedBy: deletedBy,
	}
	if len(runner.Containers) > 0 {
		r.Container = runner.Containers[0]
	}
	if cs := st.Container; cs != nil {
		r.Container, r.ContainerID, r.Restarts = cs.Name, cs.ContainerID, cs.RestartCount
		if run := cs.State.Running; run != nil {
			r.StartedAt = timePtr(run.StartedAt.Time)
		}
	}
	t := st.Terminated
	r.Class = Classify(pod, t)
	if t != nil {
		r.ExitCode, r.Signal, r.Reason = &t.ExitCode, Signal(t), t.Reason
		r.StartedAt, r.FinishedAt = timePtr(t.StartedAt.Time), timePtr(t.FinishedAt.Time)
		if t.ContainerID != "" {
			r.ContainerID = t.ContainerID
		}
	}
	if f, ok := FinalVitals(pod); ok {
		r.Vitals = &f
		// On cgroup v1 the kernel counts a kill only in the victim's own
		// cgroup, which the runtime may remove before the sidecar reads it:
		// there a zero count proves nothing. v2 counts at the pod level.
		if (r.Class == CgroupOOM || r.Class == SigKill) && (f.OOMKill > 0 || f.Cgroup == "v2") {
			confirmed := f.OOMKill > 0
			r.OOMConfirmed = &confirmed
		}
	}
	return r
}

// FinalVitals reads the final reading the vitals sidecar left in its
// termination message, current or last.
func FinalVitals(pod *corev1.Pod) (record.Final, bool) {
	for _, cs := range pod.Status.InitContainerStatuses {
		if cs.Name != runnerpod.VitalsContainer {
			continue
		}
		for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if t == nil {
				continue
			}
			if f, err := record.ParseFinal(t.Message); err == nil {
				return f, true
			}
		}
	}
	return record.Final{}, false
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
