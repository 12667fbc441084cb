package report

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/refusal"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// PodRefusals is what the guard refused to let be done to one runner, or
// in warn mode let through that enforce would refuse: kept on the live
// pod, then on its death record.
type PodRefusals struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	UID       string `json:"uid"`
	// Record is the RunnerDeath that keeps them once the runner died; ""
	// for a live runner's pod.
	Record string `json:"record,omitempty"`
	// Refusals is nil when the stored value does not parse; Error says why.
	Refusals *v1alpha1.Refusals `json:"refusals,omitempty"`
	Error    string             `json:"error,omitempty"`
}

// ErrPodGone: the pod asked for does not exist (its record, if it died,
// keeps its refusals).
var ErrPodGone = fmt.Errorf("the pod is gone")

// Refusals reads the refusals kept on the live runner pods of namespace
// ("" for every namespace), or on the one pod named. Only runner pods (as
// presets tell them) are read: the chart's policy protects the value on
// those alone.
func Refusals(ctx context.Context, c client.Reader, ps []runnerpod.Preset, namespace, name string) ([]PodRefusals, error) {
	var pods []corev1.Pod
	if name != "" {
		pod := corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &pod); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("pod %s/%s: %w", namespace, name, ErrPodGone)
			}
			return nil, fmt.Errorf("reading pod %s/%s: %w", namespace, name, err)
		}
		pods = append(pods, pod)
	} else {
		list := &corev1.PodList{}
		if err := c.List(ctx, list, client.InNamespace(namespace), client.HasLabels{runnerpod.RunnerLabel}); err != nil {
			return nil, fmt.Errorf("listing runner pods: %w", err)
		}
		pods = list.Items
	}
	var out []PodRefusals
	for i := range pods {
		pod := &pods[i]
		if _, ok := presets.Match(pod, ps); !ok {
			continue
		}
		if _, ok := pod.Annotations[refusal.Annotation]; !ok {
			continue
		}
		p := PodRefusals{Namespace: pod.Namespace, Pod: pod.Name, UID: string(pod.UID)}
		l, err := refusal.FromPod(pod.Annotations)
		if err != nil {
			p.Error = err.Error()
		}
		p.Refusals = l
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b PodRefusals) int {
		return strings.Compare(a.Namespace+"/"+a.Pod, b.Namespace+"/"+b.Pod)
	})
	return out, nil
}

// DeadRefusals reads the refusals the death records of namespace ("" for
// every namespace) keep, of the pod named ("" for every pod): what was
// refused, or let through only by warn mode, while those runners lived.
func DeadRefusals(ctx context.Context, c client.Reader, namespace, pod string) ([]PodRefusals, error) {
	list := &v1alpha1.RunnerDeathList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing death records: %w", err)
	}
	var out []PodRefusals
	for _, d := range list.Items {
		l := d.Record.Refusals
		if l == nil || len(l.Entries) == 0 && l.Dropped == 0 || pod != "" && d.Record.Pod != pod {
			continue
		}
		out = append(out, PodRefusals{Namespace: d.Namespace, Pod: d.Record.Pod, UID: d.Record.UID, Record: d.Name, Refusals: l})
	}
	slices.SortFunc(out, func(a, b PodRefusals) int {
		return strings.Compare(a.Namespace+"/"+a.Pod+"/"+a.Record, b.Namespace+"/"+b.Pod+"/"+b.Record)
	})
	return out, nil
}

// OnlyWarned keeps of each runner's refusals those warn mode let through:
// a rollout's question, "what would enforce have refused?".
func OnlyWarned(pods []PodRefusals) []PodRefusals {
	var out []PodRefusals
	for _, p := range pods {
		if p.Refusals == nil {
			continue
		}
		l := v1alpha1.Refusals{}
		for _, e := range p.Refusals.Entries {
			if e.Warned {
				l.Entries = append(l.Entries, e)
			}
		}
		if len(l.Entries) > 0 {
			p.Refusals = &l
			out = append(out, p)
		}
	}
	return out
}

// answer says what became of an entry's attempts.
func answer(e v1alpha1.Refusal) string {
	if e.Warned {
		return "warned"
	}
	return "refused"
}

// RefusalsTable renders runners' refusals for the terminal, one line per
// requester, verb and answer: refused, or warned (warn mode let it
// through; enforce would refuse it).
func RefusalsTable(pods []PodRefusals) string {
	var b strings.Builder
	if len(pods) == 0 {
		return "no refusals on any live runner pod or death record\n"
	}
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tPOD\tRUNNER\tVERB\tREQUESTER\tANSWER\tCOUNT\tFIRST\tLAST\tRULE")
	var notes []string
	for _, p := range pods {
		if p.Refusals == nil {
			notes = append(notes, fmt.Sprintf("%s/%s: refusals unreadable: %s", p.Namespace, p.Pod, Printable(p.Error)))
			continue
		}
		runner := "live"
		if p.Record != "" {
			runner = "died"
		}
		for _, e := range p.Refusals.Entries {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", p.Namespace, p.Pod, runner, Printable(e.Verb), Printable(e.By), answer(e), e.Count,
				stamp(e.First.Time), stamp(e.Last.Time), Printable(e.Rule))
		}
		if d := p.Refusals.Dropped; d > 0 {
			notes = append(notes, fmt.Sprintf("%s/%s: %d more not kept (those refused fewest times, least lately)", p.Namespace, p.Pod, d))
		}
	}
	_ = tw.Flush()
	for _, n := range notes {
		b.WriteString(n + "\n")
	}
	return b.String()
}

// refusalLines says what was refused, under a record or a live pod.
func refusalLines(b *strings.Builder, l *v1alpha1.Refusals, heading string) {
	if l == nil || len(l.Entries) == 0 && l.Dropped == 0 {
		return
	}
	fmt.Fprintf(b, "  %s:\n", heading)
	for _, e := range l.Entries {
		if e.Warned {
			b.WriteString("    (warn mode let it through; enforce would refuse it) ")
		} else {
			b.WriteString("    ")
		}
		fmt.Fprintf(b, "%s by %s: %s", Printable(e.Verb), Printable(e.By), plural(int(e.Count), "time"))
		if e.Count > 1 {
			fmt.Fprintf(b, ", %s to %s", stamp(e.First.Time), stamp(e.Last.Time))
		} else {
			fmt.Fprintf(b, ", %s", stamp(e.First.Time))
		}
		if e.Rule != "" {
			fmt.Fprintf(b, " (rule %s)", Printable(e.Rule))
		}
		b.WriteString("\n")
	}
	if l.Dropped > 0 {
		fmt.Fprintf(b, "    and %d more not kept (those refused fewest times, least lately)\n", l.Dropped)
	}
}

// refused is a record's refusals in a table's cell: the attempts refused
// and by how many requesters, and those warn mode let through; "-" for
// none.
func refused(l *v1alpha1.Refusals) string {
	if l == nil || len(l.Entries) == 0 {
		return "-"
	}
	var n, warned int64
	by := map[string]bool{}
	for _, e := range l.Entries {
		if e.Warned {
			warned += int64(e.Count)
			continue
		}
		n += int64(e.Count)
		by[e.By] = true
	}
	cell := fmt.Sprintf("%d by %d", n, len(by))
	switch {
	case warned > 0 && n == 0:
		cell = fmt.Sprintf("%d warned", warned)
	case warned > 0:
		cell += fmt.Sprintf(" +%d warned", warned)
	}
	return cell
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// Printable is s with every character a terminal would act on (control
// characters, bidirectional overrides, invisible formatting) written as an
// escape: a requester's name is whatever its authenticator let it be.
func Printable(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == unicode.ReplacementChar || !unicode.IsPrint(r):
			q := fmt.Sprintf("%+q", string(r))
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
