package runnerpod_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

func node(annotations map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-7", Annotations: annotations}}
}

func TestNodeDrainPassed(t *testing.T) {
	at := time.Date(2026, 11, 27, 15, 0, 0, 0, time.UTC)
	set := func(v, by string) *corev1.Node {
		return node(map[string]string{runnerpod.DrainDeadline: v, runnerpod.DrainDeadlineBy: by})
	}
	cases := []struct {
		name    string
		node    *corev1.Node
		now     time.Time
		want    runnerpod.NodeDrain
		passed  bool
		started time.Time // zero: an hour before the deadline
	}{
		{name: "a node without the annotation frees nothing", node: node(nil), now: at},
		{name: "no node frees nothing", now: at},
		{name: "a deadline still ahead frees nothing yet", node: set("2026-11-27T15:00:00Z", "alice"), now: at.Add(-time.Second), want: runnerpod.NodeDrain{At: at, By: "alice"}},
		{name: "a deadline reached frees the node's runners", node: set("2026-11-27T15:00:00Z", "alice"), now: at, want: runnerpod.NodeDrain{At: at, By: "alice"}, passed: true},
		{name: "a deadline with an offset is the same instant", node: set("2026-11-27T16:00:00+01:00", "alice"), now: at.Add(time.Minute), want: runnerpod.NodeDrain{At: at.In(time.FixedZone("", 3600)), By: "alice"}, passed: true},
		{name: "a deadline that names no setter frees nothing", node: set("2026-11-27T15:00:00Z", ""), now: at.Add(time.Hour), want: runnerpod.NodeDrain{At: at}},
		{name: "a value that is not an RFC3339 time frees nothing", node: set("in 2 hours", "alice"), now: at},
		{name: "a pod that started after the deadline is not freed by it", node: set("2026-11-27T15:00:00Z", "alice"), started: at.Add(time.Minute), now: at.Add(time.Hour), want: runnerpod.NodeDrain{At: at, By: "alice"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{}
			pod.Status.StartTime = &metav1.Time{Time: at.Add(-time.Hour)}
			if !tc.started.IsZero() {
				pod.Status.StartTime = &metav1.Time{Time: tc.started}
			}
			got, passed := runnerpod.NodeDrainPassed(tc.node, pod, tc.now)
			assert.Equal(t, tc.passed, passed)
			assert.True(t, tc.want.At.Equal(got.At), "at %s, want %s", got.At, tc.want.At)
			assert.Equal(t, tc.want.By, got.By)
		})
	}
}
