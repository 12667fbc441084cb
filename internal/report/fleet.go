package report

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/printable"
)

// Fleet answers "what kills our runners?" over a window: counts by class,
// the deaths an operator must look at first, and the records newest first.
type Fleet struct {
	Since   time.Time      `json:"since"`
	Total   int            `json:"total"`
	ByClass map[string]int `json:"byClass"`
	Records []death.Record `json:"records"`
}

// Summarize gathers the records written since then.
func Summarize(items []v1alpha1.RunnerDeath, since time.Time) Fleet {
	f := Fleet{Since: since, ByClass: map[string]int{}}
	for i := range items {
		if items[i].CreationTimestamp.Time.Before(since) {
			continue
		}
		r := death.FromObject(&items[i])
		f.Total++
		f.ByClass[r.Class]++
		f.Records = append(f.Records, r)
	}
	SortNewestFirst(f.Records)
	return f
}

// Table renders the summary for the terminal: classes by count (abnormal
// first), then the most recent records. Its first line names the window:
// the last window, or, for 0, every record kept.
func (f Fleet) Table(window time.Duration, wide bool, limit int) string {
	var b strings.Builder
	when := "on record"
	if window > 0 {
		when = "recorded in the last " + duration.HumanDuration(window)
	}
	if f.Total == 0 {
		fmt.Fprintf(&b, "no runner deaths or job ends %s\n", when)
		return b.String()
	}
	// A death is an abnormal class. An idle runner's removal is no job's
	// end; every other normal class is one (the owner's delete, or the
	// runner's own clean exit, as an ephemeral runner ends after its job).
	deaths, idle := 0, f.ByClass[string(death.IdleRemoved)]
	for c, n := range f.ByClass {
		if death.Class(c).Abnormal() {
			deaths += n
		}
	}
	ends := f.Total - deaths - idle
	counts := plural(deaths, "runner death") + " and " + plural(ends, "job end")
	if idle > 0 {
		counts = plural(deaths, "runner death") + ", " + plural(ends, "job end") + " and " + plural(idle, "idle removal")
	}
	fmt.Fprintf(&b, "%s %s\n\n", counts, when)
	classes := slices.SortedFunc(maps.Keys(f.ByClass), func(a, b string) int {
		if x, y := death.Class(a).Abnormal(), death.Class(b).Abnormal(); x != y {
			if x {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(f.ByClass[b], f.ByClass[a]), cmp.Compare(a, b))
	})
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLASS\tCOUNT\tMEANING")
	for _, c := range classes {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", c, f.ByClass[c], death.Class(c).Meaning())
	}
	_ = tw.Flush()
	fmt.Fprintf(&b, "\nmost recent:\n")
	b.WriteString(RecordsTable(f.Records, wide, limit))
	return b.String()
}

// RecordsTable renders records one a line, at most limit of them; wide
// adds the node, preset, memory and refusals columns.
func RecordsTable(records []death.Record, wide bool, limit int) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	head := "NAMESPACE\tPOD\tCLASS\tEXIT\tREASON\tDELETED BY\tENDED"
	if wide {
		head += "\tNODE\tPRESET\tPEAK\tOOM KILLS\tREFUSED\tREPORTED"
	}
	fmt.Fprintln(tw, head)
	for i, r := range records {
		if i == limit {
			break
		}
		exit, ended := "-", "-"
		if r.ExitCode != nil {
			exit = fmt.Sprint(*r.ExitCode)
		}
		if r.FinishedAt != nil {
			ended = r.FinishedAt.UTC().Format(time.RFC3339)
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s", r.Namespace, r.Pod, r.Class, exit, dash(r.Reason), dash(r.DeletedBy), ended)
		if wide {
			peak, kills := "-", "-"
			if v := r.Vitals; v != nil {
				kills = fmt.Sprint(v.OOMKill)
				if v.Peak != nil {
					peak = quantity(*v.Peak)
				}
			}
			line += fmt.Sprintf("\t%s\t%s\t%s\t%s\t%s\t%s", dash(r.Node), r.Preset, peak, kills, refused(r.Refusals), reported(r.Reports))
		}
		fmt.Fprintln(tw, line)
	}
	_ = tw.Flush()
	return printable.Text(b.String())
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// reported is a record's reports in one cell: each destination, its
// phase and, once told, where.
func reported(reps []v1alpha1.Report) string {
	var parts []string
	for _, r := range reps {
		part := r.Destination + " " + r.Phase
		if r.Where != "" {
			part += " " + r.Where
		}
		parts = append(parts, part)
	}
	return dash(strings.Join(parts, ","))
}
