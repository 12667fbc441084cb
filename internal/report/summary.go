package report

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/printable"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Summary renders a record for the operator's terminal: its facts, the
// CI system's own account of the job, then the runner's last words.
func Summary(r death.Record) string { return Facts(r) + FleetView(r) + Reports(r) + LastWords(r) }

// FleetView says how the CI system itself accounts for the job, beside the
// class: the two can disagree, and the system's word is only that (its
// controller, and whoever may write its object's status, wrote it).
func FleetView(r death.Record) string {
	v := r.FleetView
	if v == nil {
		return ""
	}
	line := fmt.Sprintf("  the CI system's own account: %s %s=%s", v.Object, v.Condition, v.Status)
	if v.Reason != "" {
		line += " (" + v.Reason + ")"
	}
	if v.Message != "" {
		line += ": " + v.Message
	}
	return printable.Text(line) + "\n"
}

// Reports says whether and where the death was told: one line per
// destination.
func Reports(r death.Record) string {
	var b strings.Builder
	for _, rep := range r.Reports {
		fmt.Fprintf(&b, "  reported to %s: %s", rep.Destination, rep.Phase)
		if rep.Where != "" {
			fmt.Fprintf(&b, ", %s", rep.Where)
		}
		if rep.Attempts > 1 {
			fmt.Fprintf(&b, " (%d attempts)", rep.Attempts)
		}
		if rep.Message != "" {
			fmt.Fprintf(&b, ": %s", rep.Message)
		}
		b.WriteString("\n")
	}
	return printable.Text(b.String())
}

// Facts renders what the cluster knows of a death, without the runner's
// last words (which the reporter sends only where a destination opts in).
func Facts(r death.Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pod %s/%s (uid %s", r.Namespace, r.Pod, r.UID)
	if r.Node != "" {
		fmt.Fprintf(&b, ", node %s", r.Node)
	}
	fmt.Fprintf(&b, ", preset %s)\n", r.Preset)
	b.WriteString(stallLead(r))
	fmt.Fprintf(&b, "runner %q died: %s\n  %s\n", r.Container, r.Class, death.Class(r.Class).Meaning())
	if r.ExitCode != nil {
		fmt.Fprintf(&b, "  exit code %d", *r.ExitCode)
		if r.Signal != 0 {
			fmt.Fprintf(&b, ", signal %d", r.Signal)
		}
		if r.Reason != "" {
			fmt.Fprintf(&b, ", reason %s", r.Reason)
		}
		if r.PodReason != "" {
			fmt.Fprintf(&b, ", pod reason %s", r.PodReason)
		}
		b.WriteString("\n")
	}
	if r.Reason == death.ReasonContainerStatusUnknown {
		b.WriteString("  the kubelet no longer found the container when it reported its end (an evicted pod's containers are removed at once to reclaim its disk): " +
			"the exit code is its placeholder, as is a restart it counted, and the runner's last words went with the container\n")
	}
	if r.ClassBasis != "" {
		fmt.Fprintf(&b, "  why this class: %s\n", r.ClassBasis)
	}
	if r.PodMessage != "" {
		fmt.Fprintf(&b, "  pod message: %s\n", strings.TrimSpace(r.PodMessage))
	}
	if d := r.Disruption; d != nil {
		fmt.Fprintf(&b, "  disruption: %s", d.Reason)
		if d.Message != "" {
			fmt.Fprintf(&b, " (%s)", strings.TrimSpace(d.Message))
		}
		b.WriteString("\n")
	}
	ran(&b, r)
	if r.Restarts > 0 {
		fmt.Fprintf(&b, "  restarts before this: %d\n", r.Restarts)
	}
	if j := r.Job; j != nil {
		fmt.Fprintf(&b, "  job %s\n", job(j))
	}
	if n := r.NodeState; n != nil {
		fmt.Fprintf(&b, "  node %s when recorded: %s\n", r.Node, nodeState(n))
	}
	memory(&b, r)
	refusalLines(&b, r.Refusals, "refused while it ran (the guard's record)")
	if e := r.Ending(); e != "" {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	return printable.Text(b.String())
}

// LastWords renders the runner's termination message, the container's own
// word: empty when it left none.
func LastWords(r death.Record) string {
	var b strings.Builder
	if r.Message != "" {
		cut := ""
		if r.MessageTruncated {
			cut = fmt.Sprintf(", its last %d bytes", death.MaxMessageBytes)
		}
		fmt.Fprintf(&b, "  last words (the runner's termination message%s; written by the container, not evidence):\n", cut)
		if r.DeletedAt != nil && r.FinishedAt != nil && r.FinishedAt.After(r.DeletedAt.Time) {
			fmt.Fprintf(&b, "  (the container ran on %s after its pod's deletion began: lines near the end may come after the job's end)\n",
				duration.HumanDuration(r.FinishedAt.Sub(r.DeletedAt.Time)))
		}
		for _, l := range strings.Split(strings.TrimRight(r.Message, "\n"), "\n") {
			fmt.Fprintf(&b, "    | %s\n", l)
		}
	}
	return printable.Text(b.String())
}

// ran says how long the runner ran and, where the cluster knows the job's
// own start (GitLab: the build pod exists for one job), how long the job
// ran: an ARC runner's life includes its wait for a job.
func ran(b *strings.Builder, r death.Record) {
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	switch {
	case death.Class(r.Class) == death.IdleRemoved && r.StartedAt != nil && r.DeletedAt != nil:
		fmt.Fprintf(b, "  the runner waited %s to %s (%s) and never had a job, when its fleet deleted the pod\n", ts(r.StartedAt.Time), ts(r.DeletedAt.Time), duration.HumanDuration(r.DeletedAt.Sub(r.StartedAt.Time)))
	case death.Class(r.Class) == death.JobEnded && runnerpod.Rule(r.DeleteRule) == runnerpod.RuleJobOver && r.JobStartedAt != nil && r.DeletedAt != nil:
		fmt.Fprintf(b, "  the job ran %s to %s (%s), when %s deleted the pod after it\n", ts(r.JobStartedAt.Time), ts(r.DeletedAt.Time), duration.HumanDuration(r.DeletedAt.Sub(r.JobStartedAt.Time)), r.DeletedBy)
		if r.StartedAt != nil && r.StartedAt.Before(r.JobStartedAt) {
			fmt.Fprintf(b, "  the runner had waited for it since %s (%s)\n", ts(r.StartedAt.Time), duration.HumanDuration(r.JobStartedAt.Sub(r.StartedAt.Time)))
		}
	case death.Class(r.Class) == death.JobEnded && runnerpod.Rule(r.DeleteRule) == runnerpod.RuleJobOver && r.StartedAt != nil && r.DeletedAt != nil:
		fmt.Fprintf(b, "  the runner ran %s to %s (%s), its wait for the job included, when %s deleted the pod after the job\n", ts(r.StartedAt.Time), ts(r.DeletedAt.Time), duration.HumanDuration(r.DeletedAt.Sub(r.StartedAt.Time)), r.DeletedBy)
	case death.Class(r.Class) == death.JobEnded && r.StartedAt != nil && r.DeletedAt != nil:
		from := r.StartedAt
		if r.JobStartedAt != nil {
			from = r.JobStartedAt
		}
		fmt.Fprintf(b, "  the job ran %s to %s (%s), when its owner deleted the pod to end it\n", ts(from.Time), ts(r.DeletedAt.Time), duration.HumanDuration(r.DeletedAt.Sub(from.Time)))
	case r.StartedAt != nil && r.FinishedAt != nil:
		fmt.Fprintf(b, "  ran %s to %s (%s)\n", ts(r.StartedAt.Time), ts(r.FinishedAt.Time), duration.HumanDuration(r.FinishedAt.Sub(r.StartedAt.Time)))
		switch {
		case r.DeletedAt != nil && r.DeletedAt.Before(r.FinishedAt):
			// The end is the container's last kill; the deletion, a grace
			// period earlier, is when the job was ended.
			fmt.Fprintf(b, "  its pod's deletion began at %s, %s before that: the job ended then, the container's end is the delete's last kill\n",
				ts(r.DeletedAt.Time), duration.HumanDuration(r.FinishedAt.Sub(r.DeletedAt.Time)))
		case r.JobStartedAt != nil && !r.JobStartedAt.After(r.FinishedAt.Time):
			// No deletion came before the container's end: the job ended
			// with the container.
			how := "and ended with the container"
			if death.Class(r.Class) == death.CgroupOOM {
				how += ", at the OOM kill"
			}
			fmt.Fprintf(b, "  the job ran %s to %s (%s), %s\n", ts(r.JobStartedAt.Time), ts(r.FinishedAt.Time), duration.HumanDuration(r.FinishedAt.Sub(r.JobStartedAt.Time)), how)
		}
	case r.StartedAt != nil:
		fmt.Fprintf(b, "  running since %s\n", ts(r.StartedAt.Time))
	}
	switch {
	case r.ExitCode == nil || r.DeletedAt == nil:
	case death.Class(r.Class) == death.JobEnded:
		fmt.Fprintf(b, "  exit code %d is the owner's stop of the container at the end, not the job's result\n", *r.ExitCode)
	case death.Class(r.Class) == death.IdleRemoved:
		fmt.Fprintf(b, "  exit code %d is the fleet's stop of the idle container\n", *r.ExitCode)
	}
}

// job is a job as one line: its id, what else the fleet named, and where
// it was read.
func job(j *v1alpha1.Job) string {
	id := j.ID
	if id == "" {
		id = "(no id)"
	}
	var parts []string
	for _, p := range []struct{ k, v string }{{"request", j.RequestID}, {"run", j.Run}, {"project", j.Project}, {"workflow", j.Workflow}, {"name", j.Name}, {"url", j.URL}, {"commit", j.Commit}, {"forge", j.Forge}} {
		if p.v != "" {
			parts = append(parts, p.k+" "+p.v)
		}
	}
	out := id
	if len(parts) > 0 {
		out += " (" + strings.Join(parts, ", ") + ")"
	}
	return out + ", from " + j.Source
}

func nodeState(n *v1alpha1.NodeState) string {
	if n.Gone {
		return "no Node object of that name"
	}
	var parts []string
	if n.Deleting {
		parts = append(parts, "being deleted")
	}
	if len(n.Conditions) > 0 {
		parts = append(parts, "conditions "+strings.Join(n.Conditions, ", "))
	}
	if len(n.Taints) > 0 {
		parts = append(parts, "taints "+strings.Join(n.Taints, ", "))
	}
	if len(parts) == 0 {
		return "ready, no pressure, no disruption taint"
	}
	return strings.Join(parts, "; ")
}

// Text renders a report for the terminal, saying where else to look when
// nothing is left.
func (rep Report) Text() string {
	var b strings.Builder
	switch {
	case len(rep.Records) > 0:
		for i, r := range rep.Records {
			if i > 0 {
				b.WriteString("\n")
			}
			b.WriteString(Summary(r))
		}
	case rep.Exists && rep.Runner == "running":
		fmt.Fprintf(&b, "pod %s/%s: its runner is running; no death on record\n", rep.Namespace, rep.Pod)
		if z := rep.Zombie; z != nil {
			fmt.Fprintf(&b, "  it is %s\n", z.Note)
		}
		refusalLines(&b, rep.Refusals, "refused so far")
	case rep.Exists:
		fmt.Fprintf(&b, "pod %s/%s: %s; no death on record\n", rep.Namespace, rep.Pod, rep.Runner)
		refusalLines(&b, rep.Refusals, "refused so far")
	default:
		fmt.Fprintf(&b, "pod %s/%s is gone and no runnerguard record of it remains.\n", rep.Namespace, rep.Pod)
		b.WriteString("Its RunnerDeath records may have passed the chart's retention, or the runner never ran. Look next in:\n")
		b.WriteString("  - the runnerguard pods' logs: kubectl logs -n <runnerguard namespace> -l app.kubernetes.io/name=runnerguard | grep '\"pod\":\"" + rep.Pod + "\"'\n")
		b.WriteString("  - your log pipeline, for the runner's own stdout (the GitHub runner's _diag log goes there with the diagnostic env)\n")
		b.WriteString("  - the vitals sidecar's stdout (container runnerguard-vitals) in the same pipeline\n")
	}
	return b.String()
}
