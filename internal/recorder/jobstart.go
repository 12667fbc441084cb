package recorder

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/refusal"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// jobAnnotations are what the pod cache keeps for the record's job start.
var jobAnnotations = []string{runnerpod.JobAssignedAt}

// refusalAnnotations are what the pod cache keeps for the record's
// refusals, which the guard wrote while the runner ran.
var refusalAnnotations = []string{refusal.Annotation}

// creatorAnnotations are what the pod cache keeps for the record to check
// a job-owner note against: the pod's recorded creator.
var creatorAnnotations = []string{runnerpod.CreatedBy}

// jobStart is a runner whose fleet's record (ARC's EphemeralRunner) the
// leader saw turn busy: the record's UID (the pod's controller), and when.
type jobStart struct {
	uid types.UID
	at  time.Time
}

// turnedBusy reports whether a record's update is its job's assignment:
// no job before, one now.
func turnedBusy(k fleet.RecordKeeper, before, after *unstructured.Unstructured) bool {
	was, _ := k.JudgeRecord(before, before.GetUID())
	is, _ := k.JudgeRecord(after, after.GetUID())
	return was == runnerpod.JobNone && is == runnerpod.JobAssigned
}

// maxJobStarts bounds the starts kept and not yet written: a start beyond
// it goes unwritten (its record then gives the runner's start for the
// job's).
const maxJobStarts = 4096

// JobStarts keeps, by pod, when the leader saw its fleet's record turn
// busy, until the marker writes it on the pod as
// runnerguard.io/job-assigned-at in the same patch as the marks the job's
// start brings: the annotation's one writer, which the chart's policy lets
// no one else change. A pod whose controller is not that record, or that
// has the annotation already, gets none.
type JobStarts struct {
	mu     sync.Mutex
	starts map[types.NamespacedName]jobStart
}

// NewJobStarts is an empty JobStarts.
func NewJobStarts() *JobStarts {
	return &JobStarts{starts: map[types.NamespacedName]jobStart{}}
}

// note keeps s as pod's job start, if there is room.
func (j *JobStarts) note(pod types.NamespacedName, s jobStart) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, kept := j.starts[pod]; kept || len(j.starts) < maxJobStarts {
		j.starts[pod] = s
	}
}

// of is the job start to write on pod: its time as the annotation says
// it, ok false when there is none to write. A start of another record
// than the pod's controller, or on a pod that has one, is forgotten.
func (j *JobStarts) of(pod *corev1.Pod) (string, bool) {
	if j == nil {
		return "", false
	}
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	j.mu.Lock()
	defer j.mu.Unlock()
	s, ok := j.starts[key]
	if !ok {
		return "", false
	}
	_, done := pod.Annotations[runnerpod.JobAssignedAt]
	if c := metav1.GetControllerOfNoCopy(pod); done || c == nil || c.UID != s.uid {
		delete(j.starts, key)
		return "", false
	}
	return s.at.UTC().Format(time.RFC3339), true
}

// written forgets pod's start once it is on the pod (or the pod is gone).
func (j *JobStarts) written(pod types.NamespacedName) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.starts, pod)
}

// noteStart keeps a record that turned busy as its pod's job start.
func (e *Records) noteStart(before, after any) {
	b, okB := before.(*unstructured.Unstructured)
	a, okA := after.(*unstructured.Unstructured)
	if e.starts == nil || !okB || !okA || !turnedBusy(e.keeper, b, a) {
		return
	}
	e.starts.note(e.keeper.RecordPod(a), jobStart{uid: a.GetUID(), at: time.Now()})
}
