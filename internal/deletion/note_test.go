package deletion_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/deletion"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// A note stands for the pod's deletion only when it is of this pod and of
// the deletion that followed it; a note of an override's delete only when
// the pod itself carries the override with that reason: a review anyone on
// the pod network posts, of a forged copy of the pod, cannot make a death
// an operator's deliberate one.
func TestValid(t *testing.T) {
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	deleted := func() *podtest.Wrapper { return podtest.Runner("ci", "r").Deleted(at, 30) }
	note := func(rule, reason string) *v1alpha1.DeletionNote {
		return &v1alpha1.DeletionNote{Pod: "r", UID: "uid-r", Requester: "reaper", Rule: rule, Reason: reason, Time: metav1.NewTime(at)}
	}
	for _, c := range []struct {
		name     string
		pod      *podtest.Wrapper
		note     *v1alpha1.DeletionNote
		enforced bool
		valid    bool
	}{
		{"a busy runner's delete warn mode admitted", deleted(), note("busy", ""), false, true},
		{"the same in an enforce namespace: a review posted to the warn path by another", deleted(), note("busy", ""), true, false},
		{"another pod's note", deleted(), &v1alpha1.DeletionNote{UID: "uid-other", Rule: "busy", Time: metav1.NewTime(at)}, false, false},
		{"a note no deletion followed", podtest.Runner("ci", "r"), note("busy", ""), false, false},
		{"an override's delete of a pod that carries it", deleted().Annotate(runnerpod.AllowDelete, "kernel patch"), note("override", "kernel patch"), true, true},
		{"an override's delete of a pod that carries none: a forged review's", deleted(), note("override", "kernel patch"), true, false},
		{"an override's delete with another reason than the pod's", deleted().Annotate(runnerpod.AllowDelete, "kernel patch"), note("override", "all good"), true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := deletion.Valid(c.note, c.pod.Obj(), time.Time{}, c.enforced)
			assert.Equal(t, c.valid, got != nil)
		})
	}
}
