package death

import (
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/deletion"
	"github.com/runnerguard/runnerguard/internal/presets"
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
	// Note is the guard's note of an admitted deletion of this pod, if
	// any; Enforced: its namespace is in enforce mode (deletion.Valid).
	Note     *v1alpha1.DeletionNote
	Enforced bool
	// EvictionRequest is the eviction request runnerguard, as the pod's
	// eviction responder, let the pod go on; nil when it let it go on none.
	// A death its pod's deletion caused names it.
	EvictionRequest *v1alpha1.EvictionRequestRef
	Now             time.Time
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

	// What the pod's status does not hold, read when Decide asks: only for
	// a death about to be recorded, at most once per Decide, as the guard's
	// Facts.LookupJob. Left nil, nothing is read.

	// Job reads the job the runner ran as its fleet states it now; nil
	// when it states none or cannot be read.
	Job func() *v1alpha1.Job
	// Node reads the state of the pod's node now; nil when unknown.
	Node func() *v1alpha1.NodeState
	// Recorded reports whether the death of that key is on record already:
	// it is not planned again, and nothing is read for it.
	Recorded func(key string) bool
}

// VitalsWait bounds how long a death waits for the vitals sidecar's final
// reading: the kubelet reports the runner's end first and only then stops
// the sidecar, which leaves its reading as it exits.
const VitalsWait = 15 * time.Second

// Plan is what to record now, and when to look again.
type Plan struct {
	Records []Record
	// Retry > 0: come back then; some death waits for the vitals or the
	// deleter's note (the pod's next update may bring it sooner).
	Retry time.Duration
}

// Decide plans the records of the deaths o shows, each as it is written:
// each runner termination in the pod's status (restarts in place included)
// and, for a pod removed while its runner ran, a deleted-running record. A
// death waits briefly for the sidecar's final reading and for the guard's
// note of the deleter; it is recorded without them once the wait is over.
func Decide(o Observation) Plan {
	note := believed(deletion.Valid(o.Note, o.Pod, o.GoneAt, o.Enforced), o)
	e := endingIn(o.Pod, o.GoneAt, note)
	deaths := deathsIn(o.Pod, o.Runner, e)
	if st := runnerpod.RunnerStatus(o.Pod, o.Runner.Containers); !o.GoneAt.IsZero() && st.State == runnerpod.Running {
		// A force delete or pod GC of a lost node: no terminated state
		// will ever be reported.
		r := newIn(o.Pod, o.Runner, st, e)
		r.Deleted = true
		deaths = append(deaths, r)
	}
	d := decision{Observation: o, note: note, job: once(o.Job), node: once(o.Node)}
	var p Plan
	for _, r := range deaths {
		r, wait, due := d.finish(r)
		if wait > 0 && (p.Retry == 0 || wait < p.Retry) {
			p.Retry = wait
		}
		if due {
			p.Records = append(p.Records, r)
		}
	}
	return p
}

// decision is one Decide: its observation, its valid note, the reads once.
type decision struct {
	Observation
	note *v1alpha1.DeletionNote
	job  func() *v1alpha1.Job
	node func() *v1alpha1.NodeState
}

// once is read, called at most once; a nil read reads nothing.
func once[T any](read func() *T) func() *T {
	if read == nil {
		return func() *T { return nil }
	}
	return sync.OnceValue(read)
}

// finish completes r as it is recorded: due says whether to write it now,
// else wait says how long it still waits (zero: it is not written, being
// past retention, a clean end not kept, or on record already).
func (d *decision) finish(r Record) (_ Record, wait time.Duration, due bool) {
	end, dated := endedBy(d.Pod, r)
	if dated && end.Before(d.KeepSince) {
		return r, 0, false
	}
	if left := vitalsLeft(d.Observation, r); left > 0 {
		return r, left, false
	}
	began, deleting := deletion.Began(d.Pod, d.GoneAt, d.note)
	if deleting && r.FinishedAt != nil && !r.FinishedAt.Time.Before(began) {
		r.Deleted = true
	}
	if r.Deleted && deleting {
		r.DeletedAt = &metav1.Time{Time: began}
	}
	if r.Deleted && d.EvictionRequest != nil {
		r.EvictionRequest = d.EvictionRequest.DeepCopy()
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
	// Only a runner that a deletion may have ended waits for its deleter:
	// the guard reviews deletes of running runners only, so a finished
	// runner's cleanup leaves no note to wait for. The deletion seen may be
	// the kubelet's final one, after the runner ended: one that ended near
	// it waits too, and the note dates the first.
	if d.note == nil && (r.Deleted || deleting && r.FinishedAt != nil && deletion.Near(d.Pod, d.GoneAt, r.FinishedAt.Time)) {
		if left := deletion.Left(d.Pod, d.GoneAt, d.Now); left > 0 {
			return r, left, false
		}
	}
	if d.note != nil { // a valid note implies a deletion was seen
		d.deletedBy(&r)
	}
	OOMKilled(&r)
	if !Class(r.Class).Abnormal() && (!d.KeepClean || dated && end.Before(d.CleanSince)) {
		return r, 0, false
	}
	if d.Recorded != nil && d.Recorded(r.Key()) {
		return r, 0, false
	}
	d.account(&r)
	return r, 0, true
}

// deletedBy names on r who deleted the pod, as the guard's note says, and
// reclasses a death the deletion caused by the rule that admitted it.
func (d *decision) deletedBy(r *Record) {
	n := d.note
	r.DeletedBy, r.DeleteRule, r.StartedBy, r.DeleteReason = n.Requester, n.Rule, n.StartedBy, n.Reason
	r.Job = n.Job
	switch {
	case !r.Deleted:
	case runnerpod.Rule(n.Rule) == runnerpod.RuleBusy:
		r.Refusals = warned(r.Refusals, n)
	case r.Zombie != nil && zombieEnd(runnerpod.Rule(n.Rule)):
		// A named zombie let go by its fleet's own end of it (ARC deletes
		// the pod once its EphemeralRunner went) is a zombie's end too.
		EndedZombie(r)
	case runnerpod.Rule(n.Rule) == runnerpod.RuleJobOwner && presets.OwnerOf(d.Runner.Preset.Name).EndsJob:
		EndedByOwner(r)
		TimedOut(d.Pod, r)
	case runnerpod.Rule(n.Rule) == runnerpod.RuleJobOver:
		endedAs(r, JobEnded)
		if Class(r.Class) == JobEnded {
			r.ClassBasis = JobOverBasis
		}
	case runnerpod.Rule(n.Rule) == runnerpod.RuleIdle:
		RemovedIdle(r)
	}
}

// zombieEnd reports whether a deletion under rule ends a named zombie as
// one: the zombie rule, or its fleet's word that the runner has no job.
func zombieEnd(rule runnerpod.Rule) bool {
	return rule == runnerpod.RuleZombie || rule == runnerpod.RuleJobOver || rule == runnerpod.RuleIdle
}

// account adds to a record due now what the pod's status does not hold:
// the job as its fleet states it now, else the job the guard's note kept
// from when it admitted the deletion (ARC has deleted the EphemeralRunner
// since); and, for a death an operator must look at, its node's state,
// which may explain it (WithNode).
func (d *decision) account(r *Record) {
	if j := d.job(); j != nil || r.Job == nil {
		r.Job = j
	}
	if !Class(r.Class).Abnormal() {
		return // a clean exit or a job's normal end: no node explains it
	}
	if s := d.node(); s != nil {
		WithNode(r, s)
	}
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

// New builds the record of runner's death on pod from st, the runner's
// status (whose Terminated is nil when the runner was still running).
func New(pod *corev1.Pod, runner runnerpod.Runner, st runnerpod.Status) Record {
	return newIn(pod, runner, st, endingOf(pod))
}

// newIn is New with the pod's deletion as e knows it.
func newIn(pod *corev1.Pod, runner runnerpod.Runner, st runnerpod.Status, e ending) Record {
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
	c, basis := classify(pod, r.Container, t, e)
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
	r.JobStartedAt = presets.Of(runner).JobStart(pod)
	if z, ok := runnerpod.ZombieOf(pod); ok {
		r.Zombie = &v1alpha1.Zombie{Kind: z.Kind, Since: metav1.Time{Time: z.Since}}
	}
	r.Refusals = Refusals(pod)
	if b := disruptionBasis(pod, e, r.Refusals); b != "" {
		r.ClassBasis = strings.TrimPrefix(r.ClassBasis+"; "+b, "; ")
	}
	if f, ok := FinalVitals(pod); ok {
		r.Vitals = vitals(f, r.ContainerID)
		unknownPeak(r.Vitals, f, &r)
		r.Stall = lastStall(f, &r)
	}
	r.OOMConfirmed = oomConfirmed(Class(r.Class), r.Vitals)
	return r
}
