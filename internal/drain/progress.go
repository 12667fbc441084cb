package drain

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/printable"
)

// Progress is the view of what the drain still waits for: a header line
// and one line per pod (namespace/pod, fleet, job, running for, when its
// protection ends), aligned as a table. deadline is zero without one.
func Progress(waiting []Step, now, deadline time.Time) []string {
	head := fmt.Sprintf("waiting for %d runner pod(s)", len(waiting))
	if !deadline.IsZero() {
		head += fmt.Sprintf("; their jobs end at the deadline %s (in %s)", deadline.UTC().Format(time.RFC3339), duration.HumanDuration(deadline.Sub(now)))
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tFLEET\tJOB\tRUNNING FOR\tPROTECTION ENDS")
	for _, s := range waiting {
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%s\n", s.Pod.Namespace, s.Pod.Name, s.Runner.Runner.Preset.Name, JobText(s.Job), since(s, now), ends(s, now))
	}
	_ = tw.Flush()
	return append([]string{head}, strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")...)
}

// Line is one waited-for pod as a plain line, for output that is not a
// terminal (a pipeline's log).
func Line(s Step, now time.Time) string {
	return fmt.Sprintf("waiting for %s/%s: %s, job %s, running for %s, protection ends %s",
		s.Pod.Namespace, s.Pod.Name, s.Runner.Runner.Preset.Name, JobText(s.Job), since(s, now), ends(s, now))
}

func since(s Step, now time.Time) string {
	switch {
	case s.Action == Leaving:
		return "(terminating)"
	case s.Since.IsZero():
		return "-"
	}
	return duration.HumanDuration(now.Sub(s.Since))
}

func ends(s Step, now time.Time) string {
	if s.Until.IsZero() {
		return "-"
	}
	return fmt.Sprintf("%s (in %s)", s.Until.UTC().Format(time.RFC3339), duration.HumanDuration(s.Until.Sub(now)))
}

// JobText names a job as its fleet does: the repository or project, then
// the job's id (ARC's job request id when it has no job id); "-" when
// the fleet names none. The fleet's text is escaped (printable.Text):
// a pod's job annotation can carry anything.
func JobText(j *v1alpha1.Job) string { return printable.Text(jobText(j)) }

func jobText(j *v1alpha1.Job) string {
	if j == nil {
		return "-"
	}
	id := j.ID
	if id == "" {
		id = j.RequestID
	}
	switch {
	case j.Project != "" && id != "":
		return j.Project + "#" + id
	case id != "":
		return "#" + id
	case j.Project != "":
		return j.Project
	}
	return "-"
}
