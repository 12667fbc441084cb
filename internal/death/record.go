package death

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/api/v1alpha1"

	"github.com/runnerguard/runnerguard/internal/runnerpod"
	"github.com/runnerguard/runnerguard/vitals/record"
)

// Record is one runner's death: the API's DeathRecord and the namespace
// it happened in, which the RunnerDeath object keeps in its metadata.
type Record struct {
	Namespace            string `json:"namespace"`
	v1alpha1.DeathRecord `json:",inline"`
	// Reports is the reporter's account (the object's status), read back
	// with the record; Object does not write it.
	Reports []v1alpha1.Report `json:"reports,omitempty"`
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
func New(pod *corev1.Pod, runner runnerpod.Runner, st runnerpod.Status) Record {
	r := Record{Namespace: pod.Namespace, DeathRecord: v1alpha1.DeathRecord{
		Pod: pod.Name, UID: string(pod.UID), Node: pod.Spec.NodeName,
		Preset: string(runner.Preset.Name), PodReason: podReason(pod), Disruption: disruption(pod),
	}}
	if r.PodReason != "" {
		r.PodMessage = head(pod.Status.Message, maxNoteBytes)
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
	r.LivenessProbe = HasLivenessProbe(pod, r.Container)
	t := st.Terminated
	c, basis := classify(pod, r.Container, t)
	r.Class, r.ClassBasis = string(c), basis
	if t != nil {
		if t.Reason != reasonContainerStatusUnknown {
			// ContainerStatusUnknown's message is the kubelet's own ("The
			// container could not be located..."): the container, and the
			// runner's last words with it, were gone when it wrote it.
			r.Message, r.MessageTruncated = Tail(t.Message, MaxMessageBytes)
		}
		r.ExitCode, r.Signal, r.Reason = &t.ExitCode, Signal(t), t.Reason
		r.StartedAt, r.FinishedAt = timePtr(t.StartedAt.Time), timePtr(t.FinishedAt.Time)
		if t.ContainerID != "" {
			r.ContainerID = t.ContainerID
		}
	}
	r.JobStartedAt = jobStart(pod, runner.Preset.Name)
	if f, ok := FinalVitals(pod); ok {
		r.Vitals = vitals(f, r.ContainerID)
	}
	r.OOMConfirmed = oomConfirmed(Class(r.Class), r.Vitals)
	return r
}

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

// vitals is the API's form of the sidecar's final reading: the runner
// container's own cgroup (by its container id) when the sidecar saw it,
// with the pod's beside it where they differ; else the pod's.
func vitals(f record.Final, containerID string) *v1alpha1.Vitals {
	pod := memory(record.FinalMemory{Peak: f.Peak, PeakObserved: f.PeakObserved, Limit: f.Limit, OOM: f.OOM, OOMKill: f.OOMKill, OOMKillAt: f.OOMKillAt})
	_, id, _ := strings.Cut(containerID, "://")
	c, ok := f.Containers[id]
	if id == "" || !ok {
		return &v1alpha1.Vitals{Cgroup: f.Cgroup, Scope: ScopePod, Memory: pod}
	}
	v := &v1alpha1.Vitals{Cgroup: f.Cgroup, Scope: ScopeContainer, Memory: memory(c)}
	if !equality.Semantic.DeepEqual(v.Memory, pod) {
		v.Pod = &pod
	}
	return v
}

// The scopes of a record's vitals.
const (
	ScopeContainer = "container" // the runner container's own cgroup
	ScopePod       = "pod"       // the pod's cgroup: every container and the sidecar
)

func memory(m record.FinalMemory) v1alpha1.Memory {
	out := v1alpha1.Memory{PeakObserved: m.PeakObserved, OOM: int64(m.OOM), OOMKill: int64(m.OOMKill)}
	if m.Peak != nil {
		out.Peak = ptr.To(int64(*m.Peak))
	}
	if m.Limit != nil {
		out.Limit = ptr.To(int64(*m.Limit))
	}
	if m.OOMKillAt != nil {
		out.OOMKillAt = timePtr(*m.OOMKillAt)
	}
	return out
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

func timePtr(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &metav1.Time{Time: t}
}
