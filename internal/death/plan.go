package death

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
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

// Timing of the waits a plan may ask for.
const (
	// VitalsWait bounds how long a death waits for the vitals sidecar's
	// final reading. On a real node the kubelet reports the runner's end
	// first and only then stops the sidecar, which leaves its reading as it
	// exits: a record made at the first report would never carry it.
	VitalsWait = 15 * time.Second
	// NoteWait bounds how long a death caused by a deletion waits for the
	// guard's note to reach the watcher's cache, from when the deletion
	// began or, for a pod removed at once, from when the watcher saw it
	// go. The guard writes the note just after it answers and retries it
	// for as long (guard.Notes); the watch that carries it can lag too.
	NoteWait = 5 * time.Second
	// NoteSkew is how far apart the note's time and the deletion's start
	// may be (clocks of the webhook's pods and the API server) for the note
	// to count: a note of a deletion that did not follow names nobody.
	NoteSkew = 10 * time.Second
	// NoteLag is how long after the grace period the deletion seen may
	// begin and the note still count. The kubelet's final delete moves the
	// deletionTimestamp to when it comes, and a watcher that first sees the
	// pod after it sees only that: a kubelet (or a watch) that lags by more
	// than NoteSkew made 112 of 3,333 GitLab job ends read as sigterm at
	// 10,000 runners, where the final deletes came up to 2.5 min late. A
	// note older than that (its deletion failed, and another came long
	// after) still names nobody.
	NoteLag = 5 * time.Minute
)

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
	note := validNote(o)
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
		if began, ok := deletionBegan(o, note); ok && r.FinishedAt != nil && !r.FinishedAt.Time.Before(began) {
			r.Deleted = true
		}
		// Only a runner that a deletion ended waits for its deleter: the
		// guard reviews deletes of running runners only, so a finished
		// runner's cleanup leaves no note to wait for.
		if r.Deleted && note == nil {
			if left := noteLeft(o); left > 0 {
				wait(left)
				continue
			}
		}
		if note != nil { // a valid note implies a deletion was seen
			r.DeletedBy, r.DeleteRule, r.StartedBy = note.Requester, note.Rule, note.StartedBy
			if r.Deleted && (note.Rule == RuleJobOwner && o.Runner.Preset.Name.OwnerEndsJob() || note.Rule == RuleJobOver) {
				EndedByOwner(&r)
			}
		}
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

// The guard's rule names a note carries that change what a record says
// (guard.RuleJobOwner and guard.RuleBusy are these).
const (
	// RuleJobOwner: the job's owner ended its job.
	RuleJobOwner = "job-owner"
	// RuleJobOver: the fleet's controller deleted the pod after the job was
	// over (ARC, once the Actions service accepted the runner's removal).
	RuleJobOver = "job-over"
	// RuleBusy: a busy runner's deletion, allowed only in warn mode.
	RuleBusy = "busy"
)

// validNote is the note when it is of this pod and of the deletion that
// followed it. The deletion seen may be a later one than the note's: the
// kubelet's final delete (grace 0) moves the deletionTimestamp to when it
// comes, a grace period after the noted delete or later when the kubelet
// lags. So the note counts from a grace period and NoteLag before the
// deletion seen to NoteSkew after it; a note no deletion followed names
// nobody.
func validNote(o Observation) *v1alpha1.DeletionNote {
	n := o.Note
	if n == nil || n.UID != string(o.Pod.UID) {
		return nil
	}
	start, ok := seenDeletion(o)
	if !ok {
		return nil // no deletion followed (yet)
	}
	if d := start.Sub(n.Time.Time); d < -NoteSkew || d > grace(o.Pod)+NoteLag {
		return nil
	}
	return n
}

// seenDeletion is when the deletion the pod shows began: a grace period
// before its deletionTimestamp, or when the watcher saw it gone.
func seenDeletion(o Observation) (time.Time, bool) {
	if start, ok := DeletionStart(o.Pod); ok {
		return start, true
	}
	return o.GoneAt, !o.GoneAt.IsZero()
}

// deletionBegan is when the pod's deletion was asked for: the guard's note
// when there is one, since a later delete may have moved the pod's
// deletionTimestamp, else the deletion the pod shows.
func deletionBegan(o Observation, note *v1alpha1.DeletionNote) (time.Time, bool) {
	start, ok := seenDeletion(o)
	if note != nil && (!ok || note.Time.Time.Before(start)) {
		return note.Time.Time, true
	}
	return start, ok
}

// grace is the longest the pod's graceful deletion can take: its
// terminationGracePeriodSeconds (the API's default 30 s when unset), or the
// grace of the deletion under way when longer.
func grace(pod *corev1.Pod) time.Duration {
	g := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if t := pod.Spec.TerminationGracePeriodSeconds; t != nil {
		g = *t
	}
	if d := pod.DeletionGracePeriodSeconds; d != nil && *d > g {
		g = *d
	}
	return time.Duration(g) * time.Second
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

// noteLeft is how long a death caused by a deletion still waits for the
// guard's note: up to NoteWait after the deletion seen began or, for a pod
// removed, after the watcher saw it go, whichever is later. A force delete
// removes the pod as the guard's note is being written: a watcher that lags
// sees the removal late, and the note's watch may lag as much.
func noteLeft(o Observation) time.Duration {
	start, _ := seenDeletion(o)
	if o.GoneAt.After(start) {
		start = o.GoneAt
	}
	return start.Add(NoteWait).Sub(o.Now)
}
