package notify

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/printable"
)

func TestTitle(t *testing.T) {
	oom := arc(death.CgroupOOM, erJob)
	oom.Vitals = &v1alpha1.Vitals{Cgroup: "v2", Scope: death.ScopeContainer, Memory: v1alpha1.Memory{Peak: ptr.To(int64(8482560409)), Limit: ptr.To(int64(8 << 30))}}
	deleted := arc(death.DeletedRunning, erJob)
	deleted.DeletedBy, deleted.DeleteRule = "alice", "override"
	exit := arc(death.ErrorExit, erJob)
	exit.ExitCode = ptr.To(int32(3))
	escaped := arc(death.DeletedRunning, erJob)
	escaped.DeletedBy, escaped.DeleteRule = "mallory\n\x1b[2J", "over\u202eride"
	stalled := arc(death.CgroupOOM, erJob)
	stalled.Vitals = oom.Vitals
	stalled.Stall = &v1alpha1.Stall{For: metav1.Duration{Duration: 12 * time.Minute}, Basis: "pressure"}
	negative := arc(death.CgroupOOM, erJob)
	negative.Vitals = &v1alpha1.Vitals{Memory: v1alpha1.Memory{Peak: ptr.To(int64(-1)), Limit: ptr.To(int64(8 << 30))}}
	for _, c := range []struct {
		name string
		r    death.Record
		want string
	}{
		{"an OOM kill says the memory against the limit", oom, "Runner OOM-killed: 7.9 GiB of its 8 GiB"},
		{"an OOM kill without vitals says only the kill", arc(death.CgroupOOM, erJob), "Runner OOM-killed"},
		{"a stall before the death is in the title", stalled, "Runner OOM-killed: 7.9 GiB of its 8 GiB, after 12m stalled at its memory limit"},
		{"a withheld deleter is not named", withheldBy(deleted), "Runner's pod deleted while its job ran (rule override)"},
		{"a delete says who and under which rule", deleted, "Runner's pod deleted while its job ran by alice (rule override)"},
		{"an error exit says its code", exit, "Runner exited with code 3"},
		{"a probe kill says so", arc(death.ProbeKill, erJob), "Runner killed for failing its liveness probe"},
		{"a node loss says so", arc(death.NodeLost, erJob), "Runner's node was lost"},
		{"a class this release does not know is named", arc("future-class", erJob), "Runner died: future-class"},
		{"a name with control characters stays one line, escaped", escaped, `Runner's pod deleted while its job ran by mallory\n\x1b[2J (rule over\u202eride)`},
		{"a memory that cannot be is not told", negative, "Runner OOM-killed"},
	} {
		t.Run(c.name, func(t *testing.T) { assert.Equal(t, c.want, Title(c.r)) })
	}
}

func withheldBy(r death.Record) death.Record {
	r.DeletedBy = Withheld
	return r
}

func TestCommand(t *testing.T) {
	withJob := func(id, pod string) death.Record {
		r := arc(death.CgroupOOM, &v1alpha1.Job{ID: id})
		r.Pod = pod
		return r
	}
	for _, c := range []struct {
		name string
		r    death.Record
		want string
	}{
		{"a job's numeric id finds its records", withJob("7311", "r"), "kubectl runnerguard deaths -n ci --job 7311"},
		{"a job id that is not a number gives the pod's record", withJob("7311`[x](https://evil)`", "r"), "kubectl runnerguard why -n ci r"},
		{"a pod name the API server would not allow gives the namespace's records", withJob("", "r`\nx"), "kubectl runnerguard deaths -n ci"},
	} {
		t.Run(c.name, func(t *testing.T) { assert.Equal(t, c.want, Command(c.r)) })
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

// limits is a record whose every field a rendering reads holds unit
// repeated to about n bytes (long names, control characters, unicode,
// invalid bytes, backticks), with the numbers given. The bound on n is
// some times the longest a field can be (a termination message), kept low
// enough that each input renders quickly under the fuzzer.
func limits(reason, unit string, n int, peak, limit int64, exit int32, class string) death.Record {
	n = min(max(n, 0), 8192)
	unit, reason = unit[:min(len(unit), 64)], reason[:min(len(reason), 1024)]
	long := strings.Repeat(unit, max(1, n/max(1, len(unit))))
	r := arc(death.Class(class), &v1alpha1.Job{ID: long, Run: long, Project: long, Workflow: long, Name: long, URL: long, Source: "EphemeralRunner/" + long, CreatedBy: long})
	r.Namespace, r.Pod, r.Container, r.Node, r.Reason, r.PodMessage, r.ClassBasis, r.Message = long, long, long, long, reason, long, long, long
	r.ExitCode, r.Signal = &exit, exit
	r.DeletedBy, r.DeleteRule, r.DeleteReason = long, long, long
	r.Disruption = &v1alpha1.Disruption{Reason: long, Message: long}
	r.NodeState = &v1alpha1.NodeState{Conditions: []string{long, long}, Taints: []string{long}}
	r.Vitals = &v1alpha1.Vitals{Cgroup: long, Scope: long, Memory: v1alpha1.Memory{Peak: &peak, Limit: &limit}}
	return r
}

// readable: one line (when asked) of what printable keeps, valid UTF-8.
func readable(t *testing.T, what, s string, oneLine bool) {
	t.Helper()
	assert.True(t, utf8.ValidString(s), what+" is valid UTF-8")
	assert.Equal(t, printable.Text(s), s, what+" holds no control character")
	if oneLine {
		assert.NotContains(t, s, "\n", what+" is one line")
	}
}

var classes = []string{string(death.CgroupOOM), string(death.DeletedRunning), string(death.ErrorExit), string(death.NodeLost), string(death.ProbeKill), "future-class"}

// FuzzRendering fills every field a rendering reads to its limit and
// beyond: the check run's summary stays within GitHub's limit with the
// command whole and the fence closed once, its title and name and the
// commit status's description within theirs, and each holds only
// characters to read.
func FuzzRendering(f *testing.F) {
	f.Add("OOMKilled", "```", 4096, int64(1<<33), int64(8<<30), int32(137), uint8(0), true)
	f.Add("Error", "é", 70000, int64(-1), int64(0), int32(-1), uint8(1), false)
	f.Add("\x1b]0;pwned\a", "\x1b[31m\u202e`\n", 300, int64(math.MaxInt64), int64(math.MinInt64), int32(math.MinInt32), uint8(5), true)
	f.Add("", "\xff\xfe", 8192, int64(1), int64(1), int32(math.MaxInt32), uint8(2), false)
	f.Fuzz(func(t *testing.T, reason, unit string, n int, peak, limit int64, exit int32, class uint8, lastWords bool) {
		r := limits(reason, unit, n, peak, limit, exit, classes[int(class)%len(classes)])
		s := Summary(r, lastWords)
		assert.LessOrEqual(t, utf8.RuneCountInString(s), MaxSummary)
		readable(t, "the summary", s, false)
		assert.True(t, strings.HasSuffix(s, "The whole record: `"+Command(r)+"`\n"), "the command is kept whole")
		assert.NotContains(t, Command(r), "`", "no backtick ends the command's code")
		readable(t, "the command", Command(r), true)
		body := strings.SplitN(s, "\n\n", 2)[1]
		fence := body[:strings.Index(body, "text\n")]
		assert.Equal(t, 1, strings.Count(body, "\n"+fence+"\n"), "one closing fence")
		title := Title(r)
		assert.NotEmpty(t, title)
		assert.LessOrEqual(t, utf8.RuneCountInString(title), maxTitle)
		readable(t, "the title", title, true)
		assert.NotContains(t, title, ": -", "no negative memory")
		assert.NotContains(t, title, "its -", "no negative limit")
		d := Description(r)
		assert.LessOrEqual(t, utf8.RuneCountInString(d), MaxDescription, "GitLab's limit")
		readable(t, "the description", d, true)
		name := CheckRunName(Delivery{Record: r})
		assert.LessOrEqual(t, utf8.RuneCountInString(name), 100)
		readable(t, "the check run's name", name, true)
	})
}

// FuzzEvent: the CloudEvent of any record is a valid structured event
// whose data is JSON, carries the record's title, and carries its last
// words only where the sink asked for them.
func FuzzEvent(f *testing.F) {
	f.Add("OOMKilled", "\x00\x1b\u2028", 5000, int64(1<<33), int64(8<<30), int32(137), uint8(0), false)
	f.Add("Error", "日本語\xff", 8192, int64(-5), int64(0), int32(-1), uint8(1), true)
	f.Fuzz(func(t *testing.T, reason, unit string, n int, peak, limit int64, exit int32, class uint8, lastWords bool) {
		r := limits(reason, unit, n, peak, limit, exit, classes[int(class)%len(classes)])
		e := Event(Delivery{Record: r, ID: "uid-1", Name: "rd-1", Target: Target{LastWords: lastWords, Disclose: true}})
		require.NoError(t, e.Validate())
		raw, err := json.Marshal(e)
		require.NoError(t, err)
		var got struct {
			SpecVersion string `json:"specversion"`
			ID          string `json:"id"`
			Type        string `json:"type"`
			Data        struct {
				Record  map[string]any `json:"record"`
				Title   string         `json:"title"`
				Command string         `json:"command"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(raw, &got), "the body is JSON")
		assert.Equal(t, "1.0", got.SpecVersion)
		assert.Equal(t, "uid-1", got.ID)
		assert.Equal(t, EventType, got.Type)
		assert.Equal(t, Title(r), got.Data.Title)
		assert.Equal(t, Command(r), got.Data.Command)
		_, said := got.Data.Record["message"]
		assert.Equal(t, lastWords && r.Message != "", said, "the last words only where asked for")
	})
}
