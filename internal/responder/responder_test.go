package responder

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

var (
	start = time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	now   = start.Add(10 * time.Second)
)

func tp(t time.Time) *metav1.Time { return &metav1.Time{Time: t} }

// eviction is an Eviction of pod ci/runner-1 with runnerguard in state s
// and its own account own.
func eviction(s State, own *ResponderStatus) *Eviction {
	e := &Eviction{}
	e.Namespace, e.Name = "ci", "runner-1-abcde"
	e.Spec.Target.Pod = &PodRef{Name: "runner-1", UID: "u1"}
	p, d := Priority, int32(100)
	e.Status.TargetResponders = []TargetResponder{{Name: Name, Priority: &p, State: s}, {Name: "imperative-eviction.k8s.io/evictor", Priority: &d, State: Inactive}}
	if own != nil {
		e.Status.Responders = []ResponderStatus{*own, {Name: "imperative-eviction.k8s.io/evictor"}}
	}
	return e
}

func held() Holding {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "runner-1"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	return Holding{Pod: pod, Container: "runner", Preset: runnerpod.Preset{Name: "generic"},
		Term: runnerpod.Term{Since: start.Add(-3 * time.Minute)}, Job: &v1alpha1.Job{ID: "5521", Project: "42"},
		Until: start.Add(time.Hour), Why: "preset cap 6h"}
}

func TestDecide(t *testing.T) {
	started := &ResponderStatus{Name: Name, StartTime: tp(start)}
	beat := &ResponderStatus{Name: Name, StartTime: tp(start), HeartbeatTime: tp(start), ExpectedCompletionTime: tp(start.Add(time.Hour))}
	done := &ResponderStatus{Name: Name, StartTime: tp(start), CompletionTime: tp(start)}
	busy := Runner{Busy: true, Held: held()}
	idle := Runner{Free: "the runner has ended"}
	for _, c := range []struct {
		name string
		e    *Eviction
		r    Runner
		now  time.Time
		// write: whether runnerguard writes; complete: and completes.
		write, complete, let, withdrawn bool
		again                           time.Duration
	}{
		{name: "not named", e: &Eviction{}, r: busy, now: now},
		{name: "not its turn yet", e: eviction(Inactive, nil), r: busy, now: now},
		{name: "turn not started by the controller", e: eviction(Active, &ResponderStatus{Name: Name}), r: busy, now: now},
		{name: "idle: completes at once", e: eviction(Active, started), r: idle, now: now, write: true, complete: true, let: true},
		{name: "gone: completes at once", e: eviction(Active, started), r: Runner{Gone: true}, now: now, write: true, complete: true, let: true},
		{name: "busy: first heartbeat", e: eviction(Active, started), r: busy, now: now, write: true, again: HeartbeatEvery},
		{name: "busy: heartbeat not due", e: eviction(Active, beat), r: busy, now: start.Add(time.Minute), again: 2 * time.Minute},
		{name: "busy: heartbeat due", e: eviction(Active, beat), r: busy, now: start.Add(HeartbeatEvery), write: true, again: HeartbeatEvery},
		{name: "job ended: completes", e: eviction(Active, beat), r: idle, now: start.Add(time.Minute), write: true, complete: true, let: true},
		{name: "already completed", e: eviction(Active, done), r: idle, now: now},
		{name: "withdrawn", e: eviction(Canceled, beat), r: busy, now: now, withdrawn: true},
		{name: "passed over", e: eviction(Interrupted, beat), r: busy, now: now},
		{name: "completed", e: eviction(Completed, done), r: idle, now: now},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := Decide(Input{Eviction: c.e, Runner: c.r, Now: c.now})
			assert.Equal(t, c.write, a.Write != nil, "write")
			assert.Equal(t, c.let, a.Let, "let")
			assert.Equal(t, c.withdrawn, a.Withdrawn, "withdrawn")
			assert.Equal(t, c.again, a.Again, "again")
			if c.name == "job ended: completes" {
				assert.Equal(t, time.Minute, a.Held, "held from the turn's start")
			} else {
				assert.Zero(t, a.Held)
			}
			if a.Write == nil {
				return
			}
			assert.Equal(t, c.complete, a.Write.CompletionTime != nil, "complete")
			assert.Equal(t, start, a.Write.StartTime.Time, "the controller's start is carried")
			assert.Equal(t, c.now.Truncate(time.Second), a.Write.HeartbeatTime.Time)
			require.NotNil(t, a.Write.Message)
			if c.complete {
				assert.Equal(t, a.Write.CompletionTime, a.Write.HeartbeatTime)
			} else {
				assert.Equal(t, start.Add(time.Hour), a.Write.ExpectedCompletionTime.Time, "the protection's end")
			}
		})
	}
}

func TestDecideNeverWritesBeforeTheTurnsStart(t *testing.T) {
	a := Decide(Input{Eviction: eviction(Active, &ResponderStatus{Name: Name, StartTime: tp(start)}), Runner: Runner{Free: "idle"}, Now: start.Add(-5 * time.Second)})
	require.NotNil(t, a.Write)
	assert.Equal(t, start, a.Write.HeartbeatTime.Time)
	assert.Equal(t, start, a.Write.CompletionTime.Time)
}

func TestMessagesSayTheJobHowLongAndWhenItGoes(t *testing.T) {
	a := Decide(Input{Eviction: eviction(Active, &ResponderStatus{Name: Name, StartTime: tp(start)}), Runner: Runner{Busy: true, Held: held()}, Now: start})
	assert.Equal(t, `runnerguard: runner container "runner" of pod ci/runner-1 (generic) is busy with job 42#5521, running for 3m (since 2026-12-07T09:57:00Z); `+
		`the eviction waits for the job to end, or for its protection to end at 2026-12-07T11:00:00Z (in 60m: preset cap 6h), whichever comes first`, *a.Write.Message)
	a = Decide(Input{Eviction: eviction(Active, &ResponderStatus{Name: Name, StartTime: tp(start)}), Runner: Runner{Free: "the runner has ended"}, Now: start})
	assert.Equal(t, "runnerguard: lets runner pod ci/runner-1 go: the runner has ended", *a.Write.Message)
}

func TestUntilWhy(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}}
	p := runnerpod.Preset{Name: "generic", MaxProtected: metav1.Duration{Duration: 6 * time.Hour}}
	term := runnerpod.Term{Ends: start.Add(6 * time.Hour)}
	node := &runnerpod.NodeDrain{At: start.Add(time.Hour), By: "alice"}
	assert.Equal(t, "", UntilWhy(pod, p, term, time.Time{}, nil))
	assert.Equal(t, "preset cap 6h", UntilWhy(pod, p, term, term.Ends, nil))
	assert.Equal(t, "node n1's drain deadline (runnerguard.io/drain-deadline), set by alice", UntilWhy(pod, p, term, node.At, node))
	assert.Equal(t, "its fleet's lease on the job", UntilWhy(pod, p, term, start.Add(time.Minute), node))
}

func TestNaming(t *testing.T) {
	ten := `{"spec":{"evictionResponders":[` + `{"name":"a.io/1"},{"name":"a.io/2"},{"name":"a.io/3"},{"name":"a.io/4"},{"name":"a.io/5"},` +
		`{"name":"a.io/6"},{"name":"a.io/7"},{"name":"a.io/8"},{"name":"a.io/9"},{"name":"a.io/10"}]}}`
	for _, c := range []struct {
		name, raw, path string
		warns           bool
	}{
		{name: "none yet", raw: `{"spec":{"containers":[]}}`, path: "/spec/evictionResponders"},
		{name: "the fleet's own first", raw: `{"spec":{"evictionResponders":[{"name":"actions.github.com/runner","priority":10000}]}}`, path: "/spec/evictionResponders/-"},
		{name: "named already", raw: `{"spec":{"evictionResponders":[{"name":"runnerguard.io/guard","priority":5}]}}`},
		{name: "in a pod group", raw: `{"spec":{"schedulingGroup":{"name":"g"}}}`},
		{name: "no room", raw: ten, warns: true},
		{name: "unreadable", raw: `{"spec":[]}`, warns: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ops, warning := Naming([]byte(c.raw))
			assert.Equal(t, c.warns, warning != "", warning)
			if c.path == "" {
				assert.Empty(t, ops)
				return
			}
			require.Len(t, ops, 1)
			assert.Equal(t, "add", ops[0].Operation)
			assert.Equal(t, c.path, ops[0].Path)
			b, err := json.Marshal(ops[0].Value)
			require.NoError(t, err)
			assert.Contains(t, string(b), `{"name":"runnerguard.io/guard","priority":9000}`)
		})
	}
}

func TestServed(t *testing.T) {
	res := func(names ...string) *metav1.APIResourceList {
		l := &metav1.APIResourceList{GroupVersion: "lifecycle.k8s.io/v1alpha1"}
		for _, n := range names {
			l.APIResources = append(l.APIResources, metav1.APIResource{Name: n})
		}
		return l
	}
	assert.True(t, Served(res("evictions", "evictions/status", "evictionrequests", "evictionrequests/status")))
	assert.False(t, Served(res("evictionrequests")))
	assert.False(t, Served(nil))
	assert.False(t, Served(&metav1.APIResourceList{GroupVersion: "lifecycle.k8s.io/v1beta1"}))
}

func TestEvictionReadsWhoAsksAndTheApply(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "lifecycle.k8s.io/v1alpha1", "kind": "Eviction",
		"metadata": map[string]any{"name": "e1", "namespace": "ci", "ownerReferences": []any{
			map[string]any{"apiVersion": "lifecycle.k8s.io/v1alpha1", "kind": "EvictionRequest", "name": "drain-n1-runner-1", "uid": "r1"},
		}},
		"spec": map[string]any{"target": map[string]any{"pod": map[string]any{"name": "runner-1", "uid": "u1"}}},
		"status": map[string]any{
			"requesters":       []any{map[string]any{"name": "runnerguard.io/drain", "intent": "Eviction"}, map[string]any{"name": "acme.io/x", "intent": "Withdrawn"}},
			"targetResponders": []any{map[string]any{"name": Name, "priority": int64(9000), "state": "Active"}},
			"responders":       []any{map[string]any{"name": Name, "startTime": "2026-12-07T10:00:00Z"}},
		},
	}}
	e, err := FromUnstructured(u)
	require.NoError(t, err)
	assert.Equal(t, Active, e.Turn())
	assert.Equal(t, []string{"runnerguard.io/drain"}, e.Asking())
	assert.Equal(t, []string{"drain-n1-runner-1"}, e.Requests())
	require.NotNil(t, e.Own())
	assert.Equal(t, start, e.Own().StartTime.Time.UTC())

	msg := "m"
	a := StatusApply("ci", "e1", ResponderStatus{StartTime: tp(start), HeartbeatTime: tp(now), Message: &msg})
	got, _, _ := unstructured.NestedSlice(a.Object, "status", "responders")
	assert.Equal(t, []any{map[string]any{"name": Name, "startTime": "2026-12-07T10:00:00Z", "heartbeatTime": "2026-12-07T10:00:10Z", "message": "m"}}, got)
}

func TestProgress(t *testing.T) {
	msg := "runnerguard: runner ... is busy"
	holding := eviction(Active, &ResponderStatus{Name: Name, StartTime: tp(start), Message: &msg})
	silent := eviction(Active, &ResponderStatus{Name: Name, StartTime: tp(start)})
	evicted := eviction(Completed, nil)
	evicted.Status.Conditions = []metav1.Condition{{Type: "TargetEvicted", Status: metav1.ConditionTrue, Reason: "PodDeleted"}}
	for _, c := range []struct {
		e    *Eviction
		want string
	}{
		{&Eviction{}, ""},
		{eviction(Inactive, nil), ""},
		{silent, Name + " is active"},
		{holding, Name + ": " + msg},
		{evicted, "TargetEvicted (PodDeleted)"},
	} {
		assert.Equal(t, c.want, c.e.Progress())
	}
}
