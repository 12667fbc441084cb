package notify

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/report"
)

// The services' limits: a check run's output.summary holds at most 65535
// characters (docs.github.com, "Create a check run"); a GitLab commit
// status's description at most 255 (docs.gitlab.com, "Commit statuses").
const (
	MaxSummary     = 65535
	MaxDescription = 255
	maxTitle       = 200
)

// CheckName is the check run's and the commit status's name.
const CheckName = "runnerguard"

var titles = map[death.Class]string{
	death.CgroupOOM:       "Runner OOM-killed",
	death.SigKill:         "Runner killed (SIGKILL)",
	death.SigTerm:         "Runner stopped (SIGTERM): its pod was deleted or drained",
	death.ExternalKill:    "Runner's sandbox torn down from outside",
	death.Crash:           "Runner crashed",
	death.NodeEviction:    "Runner evicted under node pressure",
	death.NodeLost:        "Runner's node was lost",
	death.DeletedRunning:  "Runner's pod deleted while its job ran",
	death.ProcessOOM:      "A process of the job was OOM-killed",
	death.JobTimeout:      "Job hit its pod's time limit",
	death.ProbeKill:       "Runner killed for failing its liveness probe",
	death.StorageEviction: "Runner evicted for its ephemeral storage",
	death.NodeDisrupted:   "Runner's node was taken away",
	death.Preempted:       "Runner preempted by a higher-priority pod",
}

// Title is the death in one line: what the developer reads first.
func Title(r death.Record) string {
	c := death.Class(r.Class)
	t, ok := titles[c]
	switch {
	case c == death.ErrorExit && r.ExitCode != nil:
		t = "Runner exited with code " + strconv.Itoa(int(*r.ExitCode))
	case !ok:
		t = "Runner died: " + r.Class
	}
	if c == death.CgroupOOM || c == death.ProcessOOM {
		if v := r.Vitals; v != nil && v.Peak != nil && v.Limit != nil {
			t += fmt.Sprintf(": %s of its %s", gib(*v.Peak), gib(*v.Limit))
		}
	}
	if c == death.DeletedRunning && r.DeletedBy != "" {
		t += " by " + r.DeletedBy
		if r.DeleteRule != "" {
			t += " (rule " + r.DeleteRule + ")"
		}
	}
	return cut(t, maxTitle)
}

// gib prints a byte count as people read memory: 7.9 GiB, 512 MiB.
func gib(n int64) string {
	const ki, mi, gi = 1 << 10, 1 << 20, 1 << 30
	unit, d := "GiB", float64(gi)
	switch {
	case n < mi:
		unit, d = "KiB", ki
	case n < gi:
		unit, d = "MiB", mi
	}
	s := strconv.FormatFloat(float64(n)/d, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + " " + unit
}

// Command is what shows the whole record.
func Command(r death.Record) string {
	if j := r.Job; j != nil && j.ID != "" && r.Namespace != "" {
		return fmt.Sprintf("kubectl runnerguard deaths -n %s --job %s", r.Namespace, j.ID)
	}
	return fmt.Sprintf("kubectl runnerguard why -n %s %s", r.Namespace, r.Pod)
}

// Summary is the check run's summary: the record's facts as the CLI prints
// them, the last words only when asked for, and the command that shows the
// rest, within GitHub's limit. The facts are fenced so that nothing the
// record holds is read as Markdown.
func Summary(r death.Record, lastWords bool) string {
	facts := report.Facts(r)
	if lastWords {
		facts += report.LastWords(r)
	}
	fence := strings.Repeat("`", max(3, longestRun(facts, '`')+1))
	head := "runnerguard recorded how this job's runner died in the cluster: " + report.Meaning[death.Class(r.Class)] + ".\n\n"
	tail := "\n" + fence + "\n\nThe whole record: `" + Command(r) + "`\n"
	open := fence + "text\n"
	room := MaxSummary - utf8.RuneCountInString(head+open+tail)
	if utf8.RuneCountInString(facts) > room {
		const more = "\n(cut: the record holds more)\n"
		facts = cut(facts, room-utf8.RuneCountInString(more)) + more
	}
	return head + open + facts + tail
}

// Description is the commit status's description: the title, within
// GitLab's limit.
func Description(r death.Record) string { return cut(Title(r), MaxDescription) }

// cut keeps s within n characters, marking a cut with an ellipsis.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	rs := []rune(s)
	return string(rs[:max(0, n-1)]) + "…"
}

func longestRun(s string, c rune) int {
	best, run := 0, 0
	for _, r := range s {
		if r == c {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best
}

func meaning(r death.Record) string { return report.Meaning[death.Class(r.Class)] }
