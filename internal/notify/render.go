package notify

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/printable"
	"github.com/runnerguard/runnerguard/internal/report"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
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

// Title is the death in one line: what the developer reads first. A
// runner ended on purpose is told as that, whatever its class.
func Title(r death.Record) string {
	if r.Deliberate() {
		return cut("Job ended on purpose: "+onPurpose(r), maxTitle)
	}
	c := death.Class(r.Class)
	t := c.Title()
	switch {
	case c == death.ErrorExit && r.ExitCode != nil:
		t = "Runner exited with code " + strconv.Itoa(int(*r.ExitCode))
	case t == "":
		t = "Runner died: " + line(r.Class)
	}
	if c == death.CgroupOOM || c == death.ProcessOOM {
		if v := r.Vitals; v != nil && v.Peak != nil && v.Limit != nil && *v.Peak >= 0 && *v.Limit > 0 {
			t += fmt.Sprintf(": %s of its %s", gib(*v.Peak), gib(*v.Limit))
		}
	}
	if st := r.Stall; st != nil && st.For.Duration > 0 {
		// GitLab shows only the title: a stall before the death is the
		// developer's first clue to a limit too tight.
		t += ", after " + duration.HumanDuration(st.For.Duration) + " stalled at its memory limit"
	}
	if c == death.DeletedRunning && r.DeletedBy != "" {
		if r.DeletedBy != Withheld {
			t += " by " + line(r.DeletedBy)
		}
		if r.DeleteRule != "" {
			t += " (rule " + line(r.DeleteRule) + ")"
		}
	}
	return cut(t, maxTitle)
}

// onPurpose says how a runner ended on purpose was let go.
func onPurpose(r death.Record) string {
	if runnerpod.Rule(r.DeleteRule) == runnerpod.RuleNodeDrain {
		return "its runner's node was drained and the drain's deadline passed"
	}
	return "its runner's pod was deleted with the override, which the cluster's operators hold"
}

// line is text someone else wrote, made one line of printable characters:
// a title or a name is shown on one line, and a control sequence in it
// would reach the developer's screen.
func line(s string) string {
	return strings.NewReplacer("\n", `\n`, "\t", `\t`).Replace(printable.Text(s))
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

// Command is what shows the whole record. It is shown as code, so only
// what cannot end the code or run long goes in: the job's id when it is a
// number (as GitHub's and GitLab's are), the namespace and the pod when
// they are the names the API server allows.
func Command(r death.Record) string {
	ns := ""
	if len(validation.IsDNS1123Label(r.Namespace)) == 0 {
		ns = " -n " + r.Namespace
	}
	switch {
	case r.Job != nil && number.MatchString(r.Job.ID) && ns != "":
		return "kubectl runnerguard deaths" + ns + " --job " + r.Job.ID
	case ns != "" && len(validation.IsDNS1123Subdomain(r.Pod)) == 0:
		return "kubectl runnerguard why" + ns + " " + r.Pod
	}
	return "kubectl runnerguard deaths" + ns
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
	head := "runnerguard recorded how this job's runner died in the cluster: " + death.Class(r.Class).Meaning() + ".\n\n"
	if r.Deliberate() {
		head = "The cluster's operators ended this job on purpose: " + onPurpose(r) + ". This is information, not a failure of the job's own work: re-run the job.\n\n" + head
	}
	tail := ""
	if r.UID == Withheld {
		tail = "Who deleted the pod or was refused, the node and the ids are withheld from this report; the command above shows them to whoever may read the record in the cluster.\n"
	}
	const more = "\n(cut: the record holds more)\n"
	keep := utf8.RuneCountInString(facts)
	// A cut shortens the fence too (the longest run of backticks it must
	// outrun): each pass cuts by what is over, until it fits.
	for {
		f := facts
		if utf8.RuneCountInString(f) > keep {
			f = cut(f, keep) + more
		}
		fence := strings.Repeat("`", max(3, longestRun(f, '`')+1))
		s := head + fence + "text\n" + f + "\n" + fence + "\n\nThe whole record: `" + Command(r) + "`\n" + tail
		over := utf8.RuneCountInString(s) - MaxSummary
		if over <= 0 || keep == 0 {
			return s
		}
		keep = max(0, keep-over)
	}
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

func meaning(r death.Record) string { return death.Class(r.Class).Meaning() }
