package death

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Event reasons and the annotation that carries the whole record, so that
// `runnerguard why` can read it back after the pod is gone.
const (
	ReasonDied       = "RunnerDied"
	ReasonDeleted    = "RunnerDeleted"
	ReasonStuck      = "RunnerStuck"
	RecordAnnotation = "runnerguard.io/death-record"
	// DeletedByAnnotation on a RunnerDeleted Event names the requester.
	DeletedByAnnotation = "runnerguard.io/deleted-by"
)

// maxNote is the events.k8s.io limit on an Event's note.
const maxNote = 1024

// EventName is the name of the Event of the death with key on pod. It is a
// function of the death alone, so every replica, restart and leader writes
// the same object: the API server's AlreadyExists is what makes a death
// recorded exactly once.
func EventName(podName, kind, key string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	if len(podName) > 200 {
		podName = podName[:200]
	}
	return fmt.Sprintf("%s.rg-%s-%016x", podName, kind, h.Sum64())
}

// EventType is Normal for a clean exit and Warning for every other death.
func (r Record) EventType() string {
	if r.Class == CleanExit {
		return corev1.EventTypeNormal
	}
	return corev1.EventTypeWarning
}

// Note is the Event's one-line summary: class, exit, reason, memory, deleter.
func (r Record) Note() string {
	parts := []string{fmt.Sprintf("runner %q died: %s", r.Container, r.Class)}
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
	switch {
	case r.Deleted && r.DeletedBy != "":
		parts = append(parts, "ended by its pod's deletion by "+r.DeletedBy)
	case r.Deleted:
		parts = append(parts, "ended by its pod's deletion (not reviewed: an exempt principal, or the guard was down)")
	case r.DeletedBy != "":
		parts = append(parts, "pod deleted afterwards by "+r.DeletedBy)
	}
	note := strings.Join(parts, "; ")
	if len(note) > maxNote {
		note = note[:maxNote-3] + "..."
	}
	return note
}

// JSON is the record as stored in the Event's annotation.
func (r Record) JSON() string {
	b, _ := json.Marshal(r) // a Record always marshals
	return string(b)
}

// Parse reads a record back from an Event annotation.
func Parse(s string) (Record, error) {
	var r Record
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return Record{}, fmt.Errorf("reading death record: %w", err)
	}
	return r, nil
}

func bytes(n uint64) string {
	return resource.NewQuantity(int64(n), resource.BinarySI).String()
}
