package deletion

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Timing of the note, shared by its writer (the guard) and its reader (the
// recorder's plan).
const (
	// NoteWait bounds how long a death caused by a deletion waits for the
	// guard's note to reach the recorder's cache, from when the deletion
	// began or, for a pod removed at once, from when the recorder saw it
	// go. The guard writes the note just after it answers and retries it
	// for as long (Notes); the watch that carries it can lag too.
	NoteWait = 5 * time.Second
	// NoteSkew is how far apart the note's time and the deletion's start
	// may be (clocks of the webhook's pods and the API server) for the note
	// to count: a note of a deletion that did not follow names nobody.
	NoteSkew = 10 * time.Second
	// NoteLag is how long after the grace period the deletion seen may
	// begin and the note still count. The kubelet's final delete moves the
	// deletionTimestamp to when it comes, and a recorder that first sees
	// the pod after it sees only that: under load kubelets and watches lag
	// by minutes, far more than NoteSkew, and a GitLab job's end would read
	// as a SIGTERM. A note older than that (its deletion failed, and
	// another came long after) still names nobody.
	NoteLag = 5 * time.Minute
)

// MaxReason bounds the override's reason a note keeps: an annotation has
// no size of its own.
const MaxReason = 512

// New is the RunnerDeletion that tells the recorder who asked for a running
// runner's pod to go, and under which rule it was allowed. It is named
// after the pod's UID: the first admitted deletion is the one that ends the
// runner; repeats find it there.
func New(pod *corev1.Pod, requester, operation, rule string, now time.Time) *v1alpha1.RunnerDeletion {
	return &v1alpha1.RunnerDeletion{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: string(pod.UID)},
		Deletion: v1alpha1.DeletionNote{
			Pod: pod.Name, UID: string(pod.UID), Requester: requester,
			Operation: operation, Rule: rule, Time: metav1.NewTime(now),
		},
	}
}

// Valid is the note when it is of this pod and of the deletion that
// followed it, and agrees with the pod and its namespace's mode (enforced),
// else nil. goneAt is when the recorder saw the pod removed
// (zero while it exists). The deletion seen may be a later one than the
// note's: the kubelet's final delete (grace 0) moves the deletionTimestamp
// to when it comes, a grace period after the noted delete or later when the
// kubelet lags. So the note counts from a grace period and NoteLag before
// the deletion seen to NoteSkew after it; a note no deletion followed names
// nobody.
func Valid(n *v1alpha1.DeletionNote, pod *corev1.Pod, goneAt time.Time, enforced bool) *v1alpha1.DeletionNote {
	if n == nil || n.UID != string(pod.UID) {
		return nil
	}
	if enforced && runnerpod.Rule(n.Rule) == runnerpod.RuleBusy {
		// A busy runner's delete is admitted only in warn mode: in an
		// enforce namespace (as the registrations select it) such a note
		// is of a review posted to the warn registration's path by anyone
		// but the API server.
		return nil
	}
	if !Near(pod, goneAt, n.Time.Time) {
		return nil // no deletion followed (yet), or not this one
	}
	if runnerpod.Rule(n.Rule) == runnerpod.RuleOverride {
		// The guard judged the review's copy of the pod, which a review
		// posted by anyone but the API server can forge: the override
		// must be on the pod itself (only its holders may set it), with
		// the reason the note gives.
		if reason, ok := runnerpod.Overridden(pod); !ok || !strings.HasPrefix(reason, strings.TrimSpace(n.Reason)) {
			return nil
		}
	}
	return n
}

// Near reports whether t falls in the window of the deletion the pod shows
// (goneAt as in Valid): from a grace period and NoteLag before that
// deletion began to NoteSkew after it. A note dated t counts for the
// deletion; a runner that ended at t may have been ended by it, though the
// deletion seen (the kubelet's final delete) came after the runner ended.
func Near(pod *corev1.Pod, goneAt, t time.Time) bool {
	start, ok := seen(pod, goneAt)
	if !ok {
		return false
	}
	d := start.Sub(t)
	return d >= -NoteSkew && d <= Grace(pod)+NoteLag
}

// Start is when the pod's deletion was asked for: a grace period before its
// deletionTimestamp.
func Start(pod *corev1.Pod) (time.Time, bool) {
	if pod.DeletionTimestamp == nil {
		return time.Time{}, false
	}
	began := pod.DeletionTimestamp.Time
	if g := pod.DeletionGracePeriodSeconds; g != nil {
		began = began.Add(-time.Duration(*g) * time.Second)
	}
	return began, true
}

// Began is when the pod's deletion was asked for: the guard's (valid) note
// when there is one, since a later delete may have moved the pod's
// deletionTimestamp, else the deletion the pod shows, else its removal.
func Began(pod *corev1.Pod, goneAt time.Time, note *v1alpha1.DeletionNote) (time.Time, bool) {
	start, ok := seen(pod, goneAt)
	if note != nil && (!ok || note.Time.Time.Before(start)) {
		return note.Time.Time, true
	}
	return start, ok
}

// Left is how long a death caused by a deletion still waits for the
// guard's note: up to NoteWait after the deletion seen began or, for a pod
// removed, after the recorder saw it go, whichever is later. A force delete
// removes the pod as the guard's note is being written: a recorder that
// lags sees the removal late, and the note's watch may lag as much.
func Left(pod *corev1.Pod, goneAt, now time.Time) time.Duration {
	start, _ := seen(pod, goneAt)
	if goneAt.After(start) {
		start = goneAt
	}
	return start.Add(NoteWait).Sub(now)
}

// Grace is the longest the pod's graceful deletion can take: its
// terminationGracePeriodSeconds (the API's default 30 s when unset), or the
// grace of the deletion under way when longer.
func Grace(pod *corev1.Pod) time.Duration {
	g := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if t := pod.Spec.TerminationGracePeriodSeconds; t != nil {
		g = *t
	}
	if d := pod.DeletionGracePeriodSeconds; d != nil && *d > g {
		g = *d
	}
	return time.Duration(g) * time.Second
}

// seen is when the deletion the pod shows began: a grace period before its
// deletionTimestamp, or when the recorder saw it gone.
func seen(pod *corev1.Pod, goneAt time.Time) (time.Time, bool) {
	if start, ok := Start(pod); ok {
		return start, true
	}
	return goneAt, !goneAt.IsZero()
}
