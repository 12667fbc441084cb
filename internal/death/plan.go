package death

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/deletion"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Observation is what the pod watcher knows of a runner pod at one moment.
type Observation struct {
	// Pod is the pod as the watcher's cache holds it, or its last state
	// once it is gone.
	Pod    *corev1.Pod
	Runner runnerpod.Runner
	// GoneAt is when the watcher saw the pod removed; zero while it exists.
	GoneAt time.Time
	// Note is the guard's note of an admitted deletion of this pod, if any.
	Note *v1alpha1.DeletionNote
	Now  time.Time
	// KeepSince: deaths that ended before it are past retention and would
	// be collected at once, so they are not recorded (a watcher restarted
	// long after does not write them again).
	KeepSince time.Time
	// KeepClean: clean exits and jobs' normal ends are recorded at all.
	KeepClean bool
	// CleanSince is KeepSince for clean exits and jobs' normal ends, which
	// retention removes sooner: a pod that outlives its clean record must
	// not have it written again.
	CleanSince time.Time
}

// VitalsWait bounds how long a death waits for the vitals sidecar's final
// reading. On a real node the kubelet reports the runner's end first and
// only then stops the sidecar, which leaves its reading as it exits: a
// record made at the first report would never carry it.
const VitalsWait = 15 * time.Second

// Plan is what to record now, and when to look again.
type Plan struct {
	Records []Record
	// Retry > 0: come back then; some death waits for the vitals or the
	// deleter's note (the pod's next update may bring it sooner).
	Retry time.Duration
}

// Decide plans the records of the deaths o shows: each runner termination
// in the pod's status (restarts in place included) and, for a pod removed
// while its runner ran, a deleted-running record. A death waits briefly
// for the sidecar's final reading and for the guard's note of the deleter;
// it is recorded without them once the wait is over.
func Decide(o Observation) Plan {
	pod := o.Pod
	gone := !o.GoneAt.IsZero()
	deaths := Deaths(pod, o.Runner)
	if st := runnerpod.RunnerStatus(pod, o.Runner.Containers); gone && st.State == runnerpod.Running {
		// A force delete or pod GC of a lost node: no terminated state
		// will ever be reported.
		r := New(pod, o.Runner, st)
		r.Deleted = true
		deaths = append(deaths, r)
	}
	note := deletion.Valid(o.Note, o.Pod, o.GoneAt)
	var p Plan
	wait := func(d time.Duration) {
		if p.Retry == 0 || d < p.Retry {
			p.Retry = d
		}
	}
	for _, r := range deaths {
		end, dated := endedBy(pod, r)
		if dated && end.Before(o.KeepSince) {
			continue
		}
		if left := vitalsLeft(o, r); left > 0 {
			wait(left)
			continue
		}
		began, deleting := deletion.Began(o.Pod, o.GoneAt, note)
		if deleting && r.FinishedAt != nil && !r.FinishedAt.Time.Before(began) {
			r.Deleted = true
		}
		if r.Deleted && deleting {
			r.DeletedAt = &metav1.Time{Time: began}
		}
		if r.Deleted && Class(r.Class) == ProbeKill {
			// The guard's note dates a deletion before the kill that the
			// pod's own deletionTimestamp (moved by a later delete) hid:
			// the deletion's signal, not the kubelet's probe.
			r.Class, r.ClassBasis = string(SigTerm), ""
			if r.ExitCode != nil && *r.ExitCode == 137 {
				r.Class = string(SigKill)
			}
			r.OOMConfirmed = oomConfirmed(Class(r.Class), r.Vitals)
		}
		// Only a runner that a deletion may have ended waits for its
		// deleter: the guard reviews deletes of running runners only, so a
		// finished runner's cleanup leaves no note to wait for. The deletion
		// seen may be the kubelet's final one, after the runner ended: one
		// that ended near it waits too, and the note dates the first.
		if note == nil && (r.Deleted || deleting && r.FinishedAt != nil && deletion.Near(o.Pod, o.GoneAt, r.FinishedAt.Time)) {
			if left := deletion.Left(o.Pod, o.GoneAt, o.Now); left > 0 {
				wait(left)
				continue
			}
		}
		if note != nil { // a valid note implies a deletion was seen
			r.DeletedBy, r.DeleteRule, r.StartedBy, r.DeleteReason = note.Requester, note.Rule, note.StartedBy, note.Reason
			r.Job = note.Job
			switch {
			case !r.Deleted:
			case runnerpod.Rule(note.Rule) == runnerpod.RuleJobOwner && o.Runner.Preset.Name.OwnerEndsJob():
				EndedByOwner(&r)
				TimedOut(o.Pod, &r)
			case runnerpod.Rule(note.Rule) == runnerpod.RuleJobOver:
				EndedByOwner(&r)
			case runnerpod.Rule(note.Rule) == runnerpod.RuleIdle:
				RemovedIdle(&r)
			}
		}
		ProcessOOMSurvived(&r)
		if !Class(r.Class).Abnormal() && (!o.KeepClean || dated && end.Before(o.CleanSince)) {
			continue
		}
		p.Records = append(p.Records, r)
	}
	return p
}

// endedBy is when r's death happened, as far as retention goes: its end or,
// for a runner whose end the kubelet could not date (ContainerStatusUnknown
// has no times), its start or else its pod's creation, which came before
// it. Once retention removed such a record, the pod would otherwise have it
// written again. A runner still running when its pod went has no end: it
// died as the watcher saw it go.
func endedBy(pod *corev1.Pod, r Record) (time.Time, bool) {
	switch {
	case r.FinishedAt != nil:
		return r.FinishedAt.Time, true
	case r.ExitCode == nil:
		return time.Time{}, false
	case r.StartedAt != nil:
		return r.StartedAt.Time, true
	}
	return pod.CreationTimestamp.Time, true
}

// vitalsLeft is how long r still waits for the vitals' final reading: while
// the sidecar runs after the runner ended, up to VitalsWait past the end.
func vitalsLeft(o Observation, r Record) time.Duration {
	if r.Vitals != nil || r.FinishedAt == nil || !o.GoneAt.IsZero() {
		return 0
	}
	for _, cs := range o.Pod.Status.InitContainerStatuses {
		if cs.Name == runnerpod.VitalsContainer && cs.State.Running != nil {
			return r.FinishedAt.Add(VitalsWait).Sub(o.Now)
		}
	}
	return 0
}
