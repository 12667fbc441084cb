package drain_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/drain"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

var now = podtest.Start.Add(41 * time.Minute)

func runner(t *testing.T, pod *corev1.Pod, signal runnerpod.JobSignal) drain.Runner {
	t.Helper()
	r, ok := presets.Match(pod, presets.Defaults())
	require.True(t, ok, "a runner pod")
	return drain.Runner{Pod: pod, Runner: r, Signal: signal}
}

func TestJudge(t *testing.T) {
	cases := []struct {
		name   string
		pod    *corev1.Pod
		signal runnerpod.JobSignal
		action drain.Action
		why    string
		until  time.Time
	}{
		{name: "an idle ARC runner is evicted at once", pod: podtest.ARCScaleSet("ci", "r").Running("runner").Obj(), signal: runnerpod.JobNone,
			action: drain.Evict, why: "the EphemeralRunner has no job assigned"},
		{name: "a runner that never started is evicted at once", pod: podtest.Runner("ci", "r").Waiting("runner", "ContainerCreating").Obj(),
			action: drain.Evict, why: "the runner has not started"},
		{name: "a finished runner is evicted at once", pod: podtest.Runner("ci", "r").Terminated("runner", 0, "Completed").Obj(),
			action: drain.Evict, why: "the runner has ended"},
		{name: "an overridden runner is evicted at once", pod: podtest.Runner("ci", "r").Running("runner").Annotate(runnerpod.AllowDelete, "upgrade").Obj(),
			action: drain.Evict, why: "overridden: upgrade"},
		{name: "a busy ARC runner is waited for until its preset's cap", pod: podtest.ARCScaleSet("ci", "r").Running("runner").Obj(), signal: runnerpod.JobAssigned,
			action: drain.Wait, until: podtest.Start.Add(168 * time.Hour)},
		{name: "a GitLab build pod is busy while its build runs, until its own deadline", pod: podtest.GitLab("ci", "g").Running("build").ActiveDeadline(3600, podtest.Start).Obj(),
			action: drain.Wait, until: podtest.Start.Add(time.Hour)},
		{name: "a terminating runner is left to go", pod: podtest.Runner("ci", "r").Running("runner").Terminating(now).Obj(),
			action: drain.Leaving, why: "the pod is already terminating"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := drain.Judge(runner(t, tc.pod, tc.signal), now)
			assert.Equal(t, tc.action, s.Action)
			assert.Equal(t, tc.why, s.Why)
			assert.True(t, tc.until.Equal(s.Until), "protection ends %s, want %s", s.Until, tc.until)
		})
	}
}

func TestNext(t *testing.T) {
	idle := drain.Step{Action: drain.Evict}
	busy := drain.Step{Action: drain.Wait}
	leaving := drain.Step{Action: drain.Leaving}
	all := []drain.Step{idle, busy, leaving}
	cases := []struct {
		name     string
		now      time.Time
		deadline time.Time
		want     drain.Tick
	}{
		{name: "without a deadline busy runners are waited for, never ended", now: now,
			want: drain.Tick{Evict: []drain.Step{idle}, Waiting: []drain.Step{busy, leaving}}},
		{name: "before the deadline busy runners are waited for", now: now, deadline: now.Add(time.Second),
			want: drain.Tick{Evict: []drain.Step{idle}, Waiting: []drain.Step{busy, leaving}}},
		{name: "at the deadline busy runners are ended and leaving pods still waited for", now: now, deadline: now,
			want: drain.Tick{Evict: []drain.Step{idle}, End: []drain.Step{busy}, Waiting: []drain.Step{leaving}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, drain.Next(all, tc.now, tc.deadline))
		})
	}
}

func TestOutcomeCode(t *testing.T) {
	cases := []struct {
		name    string
		outcome drain.Outcome
		code    int
	}{
		{name: "a drain that ended no job exits 0", outcome: drain.Outcome{}, code: 0},
		{name: "a drain whose deadline ended jobs did what was asked: 0, the jobs said in its output", outcome: drain.Outcome{Ended: 2}, code: 0},
		{name: "a drain that timed out exits 5, even after ending jobs", outcome: drain.Outcome{TimedOut: true, Ended: 1}, code: 5},
		{name: "a refused drain exits 6", outcome: drain.Outcome{Refused: true}, code: 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.code, tc.outcome.Code())
		})
	}
}

func TestParseDeadline(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want time.Time
		err  string
	}{
		{name: "a duration counts from now", in: "90m", want: now.Add(90 * time.Minute)},
		{name: "an RFC3339 time is taken as given", in: "2026-11-28T06:00:00Z", want: time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)},
		{name: "a negative duration is refused", in: "-5m", err: "must be positive"},
		{name: "anything else is refused, naming both forms", in: "tomorrow", err: "neither a duration (2h, 90m) nor an RFC3339 time"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := drain.ParseDeadline(tc.in, now)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.True(t, tc.want.Equal(got), "got %s", got)
		})
	}
}

func TestReason(t *testing.T) {
	got, err := drain.Reason(" node pool upgrade ", "alice", []string{"node-7", "node-8"})
	require.NoError(t, err)
	assert.Equal(t, "node pool upgrade (runnerguard drain of node node-7, node-8 by alice)", got)
	_, err = drain.Reason(" ", "alice", []string{"node-7"})
	assert.ErrorContains(t, err, "give --reason")
}

func TestNeeds(t *testing.T) {
	attrs := func(ps []drain.Permission) []authorizationv1.ResourceAttributes {
		var out []authorizationv1.ResourceAttributes
		for _, p := range ps {
			out = append(out, p.ResourceAttributes)
		}
		return out
	}
	t.Run("a drain without a deadline needs the cordon and the evictions only", func(t *testing.T) {
		assert.Equal(t, []authorizationv1.ResourceAttributes{
			{Verb: "patch", Resource: "nodes", Name: "node-7"},
			{Verb: "create", Resource: "pods", Subresource: "eviction", Namespace: "ci"},
			{Verb: "create", Resource: "pods", Subresource: "eviction", Namespace: "web"},
		}, attrs(drain.Needs([]string{"node-7"}, []string{"web", "ci", "web"}, nil)))
	})
	t.Run("a drain with a deadline needs the override where its runners are", func(t *testing.T) {
		ps := drain.Needs([]string{"node-7"}, []string{"ci"}, []string{"ci"})
		assert.Equal(t, []authorizationv1.ResourceAttributes{
			{Verb: "patch", Resource: "nodes", Name: "node-7"},
			{Verb: "create", Resource: "pods", Subresource: "eviction", Namespace: "ci"},
			{Verb: "patch", Resource: "pods", Namespace: "ci"},
			{Verb: "override", Group: "runnerguard.io", Resource: "runners", Namespace: "ci"},
		}, attrs(ps))
		assert.Equal(t, "override runners.runnerguard.io in namespace ci (the override, which the ClusterRole runnerguard-override grants in a default install: to end busy runners' jobs at the deadline)", ps[3].String())
		assert.Equal(t, `patch nodes on "node-7" (to cordon the node)`, ps[0].String())
		assert.Equal(t, "create pods/eviction in namespace ci (to evict its pods)", ps[1].String())
	})
}

func TestProgress(t *testing.T) {
	busy := drain.Judge(runner(t, podtest.ARCScaleSet("ci", "r").Running("runner").Obj(), runnerpod.JobAssigned), now)
	busy.Job = &v1alpha1.Job{ID: "812", Project: "acme/api"}
	got := drain.Progress([]drain.Step{busy}, now, now.Add(2*time.Hour))
	assert.Equal(t, []string{
		"waiting for 1 runner pod(s); their jobs end at the deadline 2026-11-01T14:41:00Z (in 120m)",
		"POD   FLEET          JOB           RUNNING FOR  PROTECTION ENDS",
		"ci/r  arc-scale-set  acme/api#812  41m          2026-11-08T12:00:00Z (in 6d23h)",
	}, got)
	assert.Equal(t, "waiting for ci/r: arc-scale-set, job acme/api#812, running for 41m, protection ends 2026-11-08T12:00:00Z (in 6d23h)", drain.Line(busy, now))
}

// A job's id and project come from a pod's annotations, which anyone who
// may edit the pod writes: the drain prints them escaped, never as
// sequences the operator's terminal acts on.
func TestJobTextEscapesWhatThePodWrote(t *testing.T) {
	assert.Equal(t, `acme/app#\x1b[2J`, drain.JobText(&v1alpha1.Job{Project: "acme/app", ID: "\x1b[2J"}))
	assert.Equal(t, "acme/app#42", drain.JobText(&v1alpha1.Job{Project: "acme/app", ID: "42"}))
	assert.Equal(t, "-", drain.JobText(nil))
}

func TestRequests(t *testing.T) {
	assert.Equal(t, "runnerguard-drain-runner-1", drain.RequestName("runner-1"))
	assert.Len(t, drain.RequestName(strings.Repeat("x", 253)), 253)
	ps := drain.RequestNeeds([]string{"ci", "ci"})
	require.Len(t, ps, 4)
	assert.Equal(t, "create evictionrequests.lifecycle.k8s.io in namespace ci (to ask for its runner pods' eviction)", ps[0].String())
}

func TestConditions(t *testing.T) {
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	status := func(cs []corev1.NodeCondition) map[corev1.NodeConditionType]corev1.ConditionStatus {
		m := map[corev1.NodeConditionType]corev1.ConditionStatus{}
		for _, c := range cs {
			m[c.Type] = c.Status
			assert.Equal(t, drain.ConditionReason, c.Reason)
			assert.Equal(t, now, c.LastTransitionTime.Time)
		}
		return m
	}
	assert.Equal(t, map[corev1.NodeConditionType]corev1.ConditionStatus{"DrainInProgress": "True", "Drained": "False"}, status(drain.Conditions(false, now, "m")))
	assert.Equal(t, map[corev1.NodeConditionType]corev1.ConditionStatus{"DrainInProgress": "False", "Drained": "True"}, status(drain.Conditions(true, now, "m")))
	assert.Equal(t, `patch nodes/status on "n1" (to report the drain in the node's conditions (--report-node-conditions))`, drain.ConditionNeeds([]string{"n1"})[0].String())
}

func TestAnsweredAreThePodsNamingTheResponder(t *testing.T) {
	named := &corev1.Pod{Spec: corev1.PodSpec{EvictionResponders: []corev1.EvictionResponder{{Name: "acme.io/x"}, {Name: "runnerguard.io/guard"}}}}
	other := &corev1.Pod{Spec: corev1.PodSpec{EvictionResponders: []corev1.EvictionResponder{{Name: "acme.io/x"}}}}
	none := &corev1.Pod{}
	steps := []drain.Step{{Runner: drain.Runner{Pod: named}}, {Runner: drain.Runner{Pod: other}}, {Runner: drain.Runner{Pod: none}}}
	answered, others := drain.Answered(steps, "runnerguard.io/guard")
	require.Len(t, answered, 1)
	assert.Same(t, named, answered[0].Pod)
	require.Len(t, others, 2)
}
