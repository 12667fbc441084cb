package report

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/refusal"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"a plain name is kept", "system:serviceaccount:ci:reaper", "system:serviceaccount:ci:reaper"},
		{"letters of any script are kept", "jürgen@例え.jp", "jürgen@例え.jp"},
		{"a terminal escape is written as one", "\x1b[31mred", `\x1b[31mred`},
		{"a newline cannot start a forged line", "alice\nbob delete 1", `alice\nbob delete 1`},
		{"a bidirectional override is written as an escape", "evil\u202egnp.exe", `evil\u202egnp.exe`},
		{"a backslash is doubled, so an escape cannot be forged", `a\x1b`, `a\\x1b`},
	} {
		assert.Equal(t, tc.want, Printable(tc.in), tc.name)
	}
}

func refusedTwice() *v1alpha1.Refusals {
	first := metav1.NewMicroTime(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	last := metav1.NewMicroTime(first.Add(time.Minute))
	return &v1alpha1.Refusals{Entries: []v1alpha1.Refusal{
		{By: "system:serviceaccount:ci:reaper", Verb: "delete", Rule: "busy", First: first, Last: last, Count: 2},
		{By: "mallory\x1b[2J", Verb: "exec", Rule: "busy", First: last, Last: last, Count: 1},
	}, Dropped: 3}
}

func TestRefusalsTable(t *testing.T) {
	got := RefusalsTable([]PodRefusals{{Namespace: "ci", Pod: "r", Refusals: refusedTwice()}, {Namespace: "ci", Pod: "bad", Error: "refusals: version 2, want 1"},
		{Namespace: "ci", Pod: "gone", Record: "gone.0123", Refusals: warnedOnce()}})
	lines := strings.Split(strings.TrimRight(got, "\n"), "\n")
	assert.Regexp(t, `^NAMESPACE\s+POD\s+RUNNER\s+VERB\s+REQUESTER\s+ANSWER\s+COUNT\s+FIRST\s+LAST\s+RULE$`, lines[0])
	assert.Regexp(t, `^ci\s+r\s+live\s+delete\s+system:serviceaccount:ci:reaper\s+refused\s+2\s+2026-11-27T12:00:00Z\s+2026-11-27T12:01:00Z\s+busy$`, lines[1])
	assert.Contains(t, lines[2], `mallory\x1b[2J`)
	assert.Regexp(t, `^ci\s+gone\s+died\s+delete\s+system:serviceaccount:ci:reaper\s+warned\s+1\s`, lines[3])
	assert.NotContains(t, got, "\x1b")
	assert.Contains(t, got, "ci/bad: refusals unreadable: refusals: version 2, want 1")
	assert.Contains(t, got, "ci/r: 3 more not kept")
	assert.Equal(t, "no refusals on any live runner pod or death record\n", RefusalsTable(nil))
}

func warnedOnce() *v1alpha1.Refusals {
	at := metav1.NewMicroTime(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
	return &v1alpha1.Refusals{Entries: []v1alpha1.Refusal{{By: "system:serviceaccount:ci:reaper", Verb: "delete", Rule: "busy", First: at, Last: at, Count: 1, Warned: true}}}
}

// The warn week's question, what enforce would have refused, is what
// OnlyWarned keeps: the warned entries, of every runner that has any.
func TestOnlyWarnedKeepsWhatEnforceWouldHaveRefused(t *testing.T) {
	both := refusedTwice()
	both.Entries = append(both.Entries, warnedOnce().Entries...)
	got := OnlyWarned([]PodRefusals{{Namespace: "ci", Pod: "r", Refusals: refusedTwice()}, {Namespace: "ci", Pod: "w", Refusals: both}, {Namespace: "ci", Pod: "bad"}})
	require.Len(t, got, 1)
	assert.Equal(t, "w", got[0].Pod)
	assert.Equal(t, warnedOnce().Entries, got[0].Refusals.Entries)
	assert.Equal(t, "3 by 2 +1 warned", refused(both))
	assert.Equal(t, "1 warned", refused(warnedOnce()))
}

func TestARecordAndALivePodSayWhatWasRefused(t *testing.T) {
	var b strings.Builder
	refusalLines(&b, refusedTwice(), "refused so far")
	assert.Equal(t, "  refused so far:\n"+
		"    delete by system:serviceaccount:ci:reaper: 2 times, 2026-11-27T12:00:00Z to 2026-11-27T12:01:00Z (rule busy)\n"+
		`    exec by mallory\x1b[2J: 1 time, 2026-11-27T12:01:00Z (rule busy)`+"\n"+
		"    and 3 more not kept (those refused fewest times, least lately)\n", b.String())
	b.Reset()
	refusalLines(&b, nil, "refused so far")
	assert.Empty(t, b.String(), "nothing refused, nothing said")
}

func TestRefusalsAreReadFromLiveRunnerPodsOnly(t *testing.T) {
	value, err := refusal.Format(*refusedTwice())
	require.NoError(t, err)
	presets := configtest.Enforcing().Presets
	c := fakeClient(t,
		podtest.Runner("ci", "refused").Label(runnerpod.RunnerLabel, "true").Annotate(refusal.Annotation, value).Obj(),
		podtest.Runner("ci", "quiet").Label(runnerpod.RunnerLabel, "true").Obj(),
		podtest.Runner("ci", "broken").Label(runnerpod.RunnerLabel, "true").Annotate(refusal.Annotation, "{").Obj(),
		podtest.Plain("ci", "not-a-runner").Label(runnerpod.RunnerLabel, "true").Annotate(refusal.Annotation, value).Obj(),
		podtest.Runner("other", "elsewhere").Label(runnerpod.RunnerLabel, "true").Annotate(refusal.Annotation, value).Obj())
	got, err := Refusals(context.Background(), c, presets, "ci", "")
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "broken", got[0].Pod)
	assert.Contains(t, got[0].Error, "not the stored JSON")
	assert.Equal(t, "refused", got[1].Pod)
	assert.Len(t, got[1].Refusals.Entries, 2)

	got, err = Refusals(context.Background(), c, presets, "", "")
	require.NoError(t, err)
	assert.Len(t, got, 3, "every namespace")
	got, err = Refusals(context.Background(), c, presets, "ci", "refused")
	require.NoError(t, err)
	assert.Len(t, got, 1)
	_, err = Refusals(context.Background(), c, presets, "ci", "gone")
	assert.ErrorIs(t, err, ErrPodGone)
}

func TestARecordsRefusalsInTheWideTable(t *testing.T) {
	assert.Equal(t, "3 by 2", refused(refusedTwice()))
	assert.Equal(t, "-", refused(nil))
	r := death.Record{Namespace: "ci"}
	r.Pod, r.Class, r.Refusals = "r", "error-exit", refusedTwice()
	assert.Regexp(t, `(?m)REFUSED\s+REPORTED$`, RecordsTable([]death.Record{r}, true, 10))
	assert.Regexp(t, `(?m)^ci\s+r\s+error-exit.*\s3 by 2\s+-$`, RecordsTable([]death.Record{r}, true, 10))
}
