package notify

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
)

func TestTitle(t *testing.T) {
	oom := arc(death.CgroupOOM, erJob)
	oom.Vitals = &v1alpha1.Vitals{Cgroup: "v2", Scope: death.ScopeContainer, Memory: v1alpha1.Memory{Peak: ptr.To(int64(8482560409)), Limit: ptr.To(int64(8 << 30))}}
	deleted := arc(death.DeletedRunning, erJob)
	deleted.DeletedBy, deleted.DeleteRule = "alice", "override"
	exit := arc(death.ErrorExit, erJob)
	exit.ExitCode = ptr.To(int32(3))
	for _, c := range []struct {
		name string
		r    death.Record
		want string
	}{
		{"an OOM kill says the memory against the limit", oom, "Runner OOM-killed: 7.9 GiB of its 8 GiB"},
		{"an OOM kill without vitals says only the kill", arc(death.CgroupOOM, erJob), "Runner OOM-killed"},
		{"a delete says who and under which rule", deleted, "Runner's pod deleted while its job ran by alice (rule override)"},
		{"an error exit says its code", exit, "Runner exited with code 3"},
		{"a probe kill says so", arc(death.ProbeKill, erJob), "Runner killed for failing its liveness probe"},
		{"a node loss says so", arc(death.NodeLost, erJob), "Runner's node was lost"},
		{"a class this release does not know is named", arc("future-class", erJob), "Runner died: future-class"},
	} {
		t.Run(c.name, func(t *testing.T) { assert.Equal(t, c.want, Title(c.r)) })
	}
}

func TestTheSummaryCarriesTheFactsAndTheCommandButTheLastWordsOnlyWhenAskedFor(t *testing.T) {
	r := arc(death.CgroupOOM, erJob)
	r.Message = "secret=hunter2\nKilled"
	got := Summary(r, false)
	assert.Contains(t, got, "runner \"\" died: cgroup-oom")
	assert.Contains(t, got, "job 7311 (run 900123, project acme/app), from EphemeralRunner/r")
	assert.Contains(t, got, "`kubectl runnerguard deaths -n ci --job 7311`")
	assert.NotContains(t, got, "hunter2")
	assert.Contains(t, Summary(r, true), "    | secret=hunter2\n")
}

func TestAMessageOfBackticksCannotCloseTheFence(t *testing.T) {
	r := arc(death.Crash, erJob)
	r.Message = "```\n# heading\n````"
	got := Summary(r, true)
	assert.True(t, strings.HasPrefix(strings.SplitN(got, "\n\n", 2)[1], "`````text\n"), got)
}

// FuzzRendering fills every field a rendering reads to its limit and
// beyond: the summary stays within GitHub's limit with the command whole,
// the description within GitLab's, and the fence is never closed early.
func FuzzRendering(f *testing.F) {
	f.Add("OOMKilled", "```", 4096, 512, int64(1<<33), true)
	f.Add("Error", "é", 70000, 100000, int64(-1), false)
	f.Fuzz(func(t *testing.T, reason, unit string, n, jobLen int, peak int64, lastWords bool) {
		n, jobLen = min(max(n, 0), 100000), min(max(jobLen, 0), 100000)
		long := strings.Repeat(unit, max(1, n/max(1, len(unit))))
		field := strings.Repeat(unit, max(1, jobLen/max(1, len(unit))))
		r := arc(death.CgroupOOM, &v1alpha1.Job{ID: field, Run: field, Project: field, Workflow: field, Name: field, URL: field, Source: "EphemeralRunner/" + field})
		r.Namespace, r.Pod, r.Reason, r.PodMessage, r.ClassBasis, r.Message = "ci", field, reason, long, long, long
		r.DeletedBy, r.DeleteRule, r.DeleteReason = field, field, long
		r.Disruption = &v1alpha1.Disruption{Reason: field, Message: long}
		r.NodeState = &v1alpha1.NodeState{Conditions: []string{long, long}, Taints: []string{field}}
		r.Vitals = &v1alpha1.Vitals{Cgroup: "v2", Memory: v1alpha1.Memory{Peak: &peak, Limit: &peak}}
		s := Summary(r, lastWords)
		assert.LessOrEqual(t, utf8.RuneCountInString(s), MaxSummary)
		assert.True(t, strings.HasSuffix(s, "The whole record: `"+Command(r)+"`\n") || utf8.RuneCountInString(Command(r)) > MaxSummary/2, "the command is kept whole")
		body := strings.SplitN(s, "\n\n", 2)[1]
		fence := body[:strings.Index(body, "text\n")]
		assert.Equal(t, 1, strings.Count(body, "\n"+fence+"\n"), "one closing fence")
		assert.LessOrEqual(t, utf8.RuneCountInString(Description(r)), MaxDescription)
		assert.NotEmpty(t, Title(r))
	})
}
