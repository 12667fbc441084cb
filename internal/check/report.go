package check

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
)

// Report renders the facts for the terminal, one row per thing checked.
func Report(f Facts) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	row := func(what, format string, a ...any) { fmt.Fprintf(tw, "%s\t%s\n", what, fmt.Sprintf(format, a...)) }
	if f.Release == "" {
		row("release", "not found")
		_ = tw.Flush()
		return b.String()
	}
	row("release", "%s in namespace %s", f.Release, dash(f.Namespace))
	switch c := f.Certificate; {
	case c.Name == "":
		row("certificate", "none named")
	case c.Ready:
		row("certificate", "%s: Ready", c.Name)
	default:
		row("certificate", "%s: NOT READY: %s", c.Name, c.Problem)
	}
	if f.Service != "" {
		endpoints := fmt.Sprint(f.ReadyEndpoints)
		if f.ReadyEndpoints < 0 {
			endpoints = "unknown"
		}
		row("service", "%s, ready endpoints: %s", f.Service, endpoints)
	}
	for _, p := range f.Guard {
		row("guard", "%s", probeRow(p, "a dry-run eviction"))
	}
	for _, p := range f.Injector {
		row("injector", "%s", probeRow(p, "a dry-run runner pod"))
	}
	presets := "none seen"
	if len(f.Presets) > 0 {
		var names []string
		for _, p := range f.Presets {
			names = append(names, string(p))
		}
		presets = strings.Join(names, ", ")
	}
	row("presets", "%s", presets)
	row("namespaces", "%s", namespaces(f))
	_ = tw.Flush()
	return b.String()
}

func probeRow(p Probe, request string) string {
	policy := ""
	if p.FailurePolicy != "" {
		policy = ", failure policy " + p.FailurePolicy
	}
	switch p.Outcome {
	case Answered:
		return fmt.Sprintf("%s answered %s in %s in %s%s", p.Webhook, request, p.Namespace, p.Took.Round(time.Millisecond), policy)
	case NotProbed:
		return fmt.Sprintf("%s not probed: %s", p.Webhook, p.Detail)
	}
	return fmt.Sprintf("%s %s in %s after %s%s: %s", p.Webhook, strings.ToUpper(string(p.Outcome)), p.Namespace, p.Took.Round(time.Millisecond), policy, p.Detail)
}

// namespaces lists the opted-in namespaces with the guard's mode in each;
// the mode a namespace's label does not set is the chart's.
func namespaces(f Facts) string {
	if f.NamespacesUnread != "" {
		return "unknown: " + f.NamespacesUnread
	}
	if len(f.Namespaces) == 0 {
		return "none opted in"
	}
	var parts []string
	for _, n := range f.Namespaces {
		switch {
		case n.Labelled:
			parts = append(parts, fmt.Sprintf("%s (%s, by label)", n.Name, n.Mode))
		case n.Mode != "":
			parts = append(parts, fmt.Sprintf("%s (%s)", n.Name, n.Mode))
		default:
			parts = append(parts, fmt.Sprintf("%s (the chart's mode)", n.Name))
		}
	}
	return strings.Join(parts, ", ")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
