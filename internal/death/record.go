package death

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/printable"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Record is one runner's death: the API's DeathRecord and the namespace
// it happened in, which the RunnerDeath object keeps in its metadata.
type Record struct {
	Namespace            string `json:"namespace"`
	v1alpha1.DeathRecord `json:",inline"`
	// Reports is the reporter's account (the object's status), read back
	// with the record; Object does not write it.
	Reports []v1alpha1.Report `json:"reports,omitempty"`
	// FleetView is the CI system's own account of the job (the object's
	// status), read back with the record; Object does not write it.
	FleetView *v1alpha1.FleetView `json:"fleetView,omitempty"`
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

// Labels on a RunnerDeath: the class lets retention list records as
// metadata only; the pod UID finds a pod's records; JobLabel, a job's.
const (
	ClassLabel  = "runnerguard.io/class"
	PodUIDLabel = "runnerguard.io/pod-uid"
)

// ObjectName is the name of the RunnerDeath of the death with key on pod. It
// is a function of the death alone, so every replica, restart and leader
// writes the same object: the API server's AlreadyExists is what keeps a
// death recorded exactly once.
func ObjectName(podName, key string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	if len(podName) > 200 {
		podName = podName[:200]
	}
	return fmt.Sprintf("%s.%016x", podName, h.Sum64())
}

// Name is the name of the RunnerDeath that keeps r: its death's, so the API
// server keeps one per death.
func (r Record) Name() string { return ObjectName(r.Pod, r.Key()) }

// Object is the RunnerDeath that keeps r.
func (r Record) Object() *v1alpha1.RunnerDeath {
	o := &v1alpha1.RunnerDeath{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: r.Namespace, Name: r.Name(),
			Labels: map[string]string{ClassLabel: r.Class, PodUIDLabel: r.UID},
		},
		Record: r.DeathRecord,
	}
	if id := jobLabelValue(r.Job); id != "" {
		o.Labels[JobLabel] = id
	}
	return o
}

// FromObject reads the record a RunnerDeath keeps.
func FromObject(o *v1alpha1.RunnerDeath) Record {
	return Record{Namespace: o.Namespace, DeathRecord: o.Record, Reports: o.Status.Reports, FleetView: o.Status.FleetView}
}

// JobLabel is the RunnerDeath label holding the job's id, when the id is a
// valid label value: the API server filters records by it (deaths --job).
const JobLabel = "runnerguard.io/job"

// jobLabelValue is the job's id as a label value, or "" when it cannot be
// one (a RunnerDeath is still written; only --job cannot find it).
func jobLabelValue(j *v1alpha1.Job) string {
	if j == nil || j.ID == "" || len(validation.IsValidLabelValue(j.ID)) > 0 {
		return ""
	}
	return j.ID
}

// Event reasons: the Events are notifications for kubectl describe and
// event exporters; the RunnerDeath is the record.
const (
	ReasonDied     = "RunnerDied"
	ReasonJobEnded = "RunnerJobEnded"
	// ReasonIdleRemoved is the Normal Event of an idle runner its fleet
	// removed.
	ReasonIdleRemoved = "RunnerIdleRemoved"
	ReasonStuck       = "RunnerStuck"
)

// maxNote is the events.k8s.io limit on an Event's note.
const maxNote = 1024

// EventReason is the reason of the Event that notifies r.
func (r Record) EventReason() string {
	switch Class(r.Class) {
	case JobEnded:
		return ReasonJobEnded
	case IdleRemoved:
		return ReasonIdleRemoved
	}
	return ReasonDied
}

// EventType is Normal for a clean exit or a job's normal end and Warning
// for every other death.
func (r Record) EventType() string {
	if !Class(r.Class).Abnormal() {
		return corev1.EventTypeNormal
	}
	return corev1.EventTypeWarning
}

// Note is the Event's one-line summary: class, job, exit, reason, memory,
// deleter.
func (r Record) Note() string {
	parts := []string{fmt.Sprintf("runner %q died: %s", r.Container, r.Class)}
	switch Class(r.Class) {
	case JobEnded:
		parts[0] = fmt.Sprintf("runner %q: its job ended (%s)", r.Container, r.Class)
	case IdleRemoved:
		parts[0] = fmt.Sprintf("runner %q: removed by its fleet while idle, with no job (%s)", r.Container, r.Class)
	case ZombieEnded:
		parts[0] = fmt.Sprintf("runner %q: ended as a zombie that would never run a job (%s)", r.Container, r.Class)
	}
	if r.Job != nil && r.Job.ID != "" {
		parts = append(parts, "job "+r.Job.ID)
	}
	if r.ExitCode != nil {
		exit := fmt.Sprintf("exit %d", *r.ExitCode)
		if r.Signal != 0 {
			exit += fmt.Sprintf(" (signal %d)", r.Signal)
		}
		if r.Reason != "" {
			exit += ", reason " + r.Reason
		}
		parts = append(parts, exit)
	}
	if v := r.Vitals; v != nil {
		mem := fmt.Sprintf("oom %d, oom_kill %d", v.OOM, v.OOMKill)
		if v.Peak != nil {
			mem = "peak " + bytes(*v.Peak)
			if v.Limit != nil {
				mem += " of " + bytes(*v.Limit) + " limit"
			}
			mem += fmt.Sprintf(", oom %d, oom_kill %d", v.OOM, v.OOMKill)
		}
		parts = append(parts, mem)
	}
	if e := r.Ending(); e != "" {
		parts = append(parts, e)
	}
	// What jobs and requesters wrote, made safe to show.
	note := printable.Text(strings.Join(parts, "; "))
	if len(note) > maxNote {
		note = note[:maxNote-3] + "..."
	}
	return note
}

// Ending says who ended the runner, as the Event and `runnerguard why`
// both put it: the deleter as the guard noted them, or that the delete went
// unreviewed.
func (r Record) Ending() string {
	e := r.ending()
	if e != "" && r.StartedBy != "" && runnerpod.Rule(r.DeleteRule) != runnerpod.RuleNodeDrain {
		e += ", on the deletion of its EphemeralRunner by " + r.StartedBy
	}
	if e != "" && r.DeleteReason != "" {
		e += fmt.Sprintf(", reason %q", r.DeleteReason)
	}
	if er := r.EvictionRequest; e != "" && er != nil {
		e += ", carrying out " + evictionRequestText(er)
	}
	return e
}

// evictionRequestText names the eviction request a pod went on: the
// deleter is then the evictor; the requester is who asked.
func evictionRequestText(er *v1alpha1.EvictionRequestRef) string {
	t := "an eviction request"
	if len(er.Names) > 0 {
		t = "eviction request " + strings.Join(er.Names, ", ")
	}
	if len(er.Requesters) > 0 {
		t += " by " + strings.Join(er.Requesters, ", ")
	}
	if er.HeldFor != nil && er.HeldFor.Duration > 0 {
		t += fmt.Sprintf(" (runnerguard held it %s for the job)", duration.HumanDuration(er.HeldFor.Duration))
	}
	return t
}

func (r Record) ending() string {
	switch {
	case Class(r.Class) == JobEnded && runnerpod.Rule(r.DeleteRule) == runnerpod.RuleJobOver:
		return fmt.Sprintf("its fleet said the job was over when %s deleted its pod", r.DeletedBy)
	case Class(r.Class) == JobEnded:
		return fmt.Sprintf("the job's owner, %s, ended the job by deleting its pod", r.DeletedBy)
	case Class(r.Class) == IdleRemoved:
		return fmt.Sprintf("it had no job when %s deleted its pod", r.DeletedBy)
	case Class(r.Class) == ZombieEnded && r.Zombie != nil:
		return fmt.Sprintf("a zombie (%s since %s), ended by %s", r.Zombie.Kind, r.Zombie.Since.UTC().Format(time.RFC3339), r.DeletedBy)
	case r.Deleted && r.DeletedBy != "" && runnerpod.Rule(r.DeleteRule) == runnerpod.RuleNodeDrain:
		return fmt.Sprintf("ended by its pod's deletion, requested by %s once its node's drain deadline (%s) had passed, set by %s", r.DeletedBy, runnerpod.DrainDeadline, r.StartedBy)
	case r.Deleted && r.DeletedBy != "" && runnerpod.Rule(r.DeleteRule) == runnerpod.RuleBusy:
		return fmt.Sprintf("ended by its pod's deletion, requested by %s: allowed only because the guard was in warn mode; enforce would have refused it", r.DeletedBy)
	case r.Deleted && r.DeletedBy != "" && r.DeleteRule != "":
		return fmt.Sprintf("ended by its pod's deletion, requested by %s (allowed: %s)", r.DeletedBy, r.DeleteRule)
	case r.Deleted && r.DeletedBy != "":
		return fmt.Sprintf("ended by its pod's deletion, requested by %s", r.DeletedBy)
	case r.Deleted:
		return "ended by its pod's deletion; the delete was not reviewed (an exempt principal, or the guard was down)"
	case r.DeletedBy != "":
		return "pod deleted afterwards by " + r.DeletedBy
	}
	return ""
}

func bytes(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}

// Deliberate reports whether the runner was ended on purpose: its pod's
// deletion was allowed by the override annotation or by its node's drain
// deadline, each set by someone entitled to end a busy runner. Its job
// was lost by a choice, not a fault, which a report tells as information.
func (r Record) Deliberate() bool {
	switch runnerpod.Rule(r.DeleteRule) {
	case runnerpod.RuleOverride, runnerpod.RuleNodeDrain:
		return r.Deleted
	}
	return false
}
