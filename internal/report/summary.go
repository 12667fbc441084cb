package report

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/runnerguard/runnerguard/internal/death"
)

// Meaning says what a class of death means, for the human reading the
// record (the classes' table in docs/design).
var Meaning = map[death.Class]string{
	death.CleanExit:      "the runner quit on its own; a \"lost communication\" here is the completion handshake, not a death",
	death.CgroupOOM:      "the container hit its memory limit and the kernel OOM-killed it",
	death.SigKill:        "SIGKILL from inside (a guest OOM in a VM runtime) or from the runtime; check the vitals' oom_kill",
	death.SigTerm:        "SIGTERM: the pod was deleted or drained",
	death.ExternalKill:   "a literal exit 9, which no runner code path emits: the sandbox was torn down from outside",
	death.Crash:          "the runner crashed (segfault or abort)",
	death.ErrorExit:      "the runner's own failure exit code",
	death.NodeEviction:   "the kubelet evicted the pod under node pressure",
	death.NodeLost:       "the node or its kubelet vanished",
	death.DeletedRunning: "the pod was removed at once while its runner was still running",
	death.JobEnded:       "the job's owner deleted the pod to end the job: its normal end, not a death",
	death.JobTimeout:     "the pod's activeDeadlineSeconds ran out: the job hit its time limit",
}

// Summary renders a record for the operator's terminal.
func Summary(r death.Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pod %s/%s (uid %s", r.Namespace, r.Pod, r.UID)
	if r.Node != "" {
		fmt.Fprintf(&b, ", node %s", r.Node)
	}
	fmt.Fprintf(&b, ", preset %s)\n", r.Preset)
	fmt.Fprintf(&b, "runner %q died: %s\n  %s\n", r.Container, r.Class, Meaning[death.Class(r.Class)])
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
	if r.StartedAt != nil && r.FinishedAt != nil {
		fmt.Fprintf(&b, "  ran %s to %s (%s)\n", r.StartedAt.UTC().Format(time.RFC3339), r.FinishedAt.UTC().Format(time.RFC3339), duration.HumanDuration(r.FinishedAt.Sub(r.StartedAt.Time)))
	} else if r.StartedAt != nil {
		fmt.Fprintf(&b, "  running since %s\n", r.StartedAt.UTC().Format(time.RFC3339))
	}
	if r.Restarts > 0 {
		fmt.Fprintf(&b, "  restarts before this: %d\n", r.Restarts)
	}
	if v := r.Vitals; v != nil {
		b.WriteString("  memory (vitals' final reading):")
		if v.Peak != nil {
			fmt.Fprintf(&b, " peak %s", quantity(*v.Peak))
			if v.PeakObserved {
				b.WriteString(" (highest seen; the kernel has no memory.peak)")
			}
		}
		if v.Limit != nil {
			fmt.Fprintf(&b, " of %s limit", quantity(*v.Limit))
		}
		fmt.Fprintf(&b, ", oom %d, oom_kill %d\n", v.OOM, v.OOMKill)
	} else {
		b.WriteString("  memory: no vitals reading was left (no sidecar, or it was not stopped cleanly)\n")
	}
	if r.OOMConfirmed != nil {
		if *r.OOMConfirmed {
			b.WriteString("  the vitals confirm an OOM kill\n")
		} else {
			b.WriteString("  the vitals counted no OOM kill: the kill came from elsewhere\n")
		}
	}
	if e := r.Ending(); e != "" {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	return b.String()
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
	case rep.Exists:
		fmt.Fprintf(&b, "pod %s/%s: %s; no death on record\n", rep.Namespace, rep.Pod, rep.Runner)
	default:
		fmt.Fprintf(&b, "pod %s/%s is gone and no runnerguard record of it remains.\n", rep.Namespace, rep.Pod)
		b.WriteString("Its RunnerDeath records may have passed the chart's retention, or the runner never ran. Look next in:\n")
		b.WriteString("  - the runnerguard pods' logs: kubectl logs -n <runnerguard namespace> -l app.kubernetes.io/name=runnerguard | grep '\"pod\":\"" + rep.Pod + "\"'\n")
		b.WriteString("  - your log pipeline, for the runner's own stdout (the GitHub runner's _diag log goes there with the diagnostic env)\n")
		b.WriteString("  - the vitals sidecar's stdout (container runnerguard-vitals) in the same pipeline\n")
	}
	return b.String()
}

// quantity prints a byte count as Kubernetes prints memory (128Mi).
func quantity(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}
