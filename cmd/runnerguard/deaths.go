package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/report"
)

// deaths answers "what kills our runners?": counts by class and the recent
// records, from the RunnerDeath objects.
func deaths(args []string, out io.Writer) error {
	fs := newFlagSet("deaths", "deaths [-n NAMESPACE | -A] [--since 24h] [--job ID] [-o text|wide|json]", out)
	var kf kubeFlags
	kf.bind(fs)
	all := fs.Bool("A", false, "all namespaces")
	fs.BoolVar(all, "all-namespaces", false, "all namespaces")
	since := fs.Duration("since", 24*time.Hour, "only deaths recorded within this long")
	output := fs.String("o", "text", "output: text, wide or json")
	limit := fs.Int("limit", 20, "recent records shown (text and wide)")
	job := fs.String("job", "", "only the deaths of this CI job (its id, as the record names it); all time unless --since is given")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fmt.Errorf("%w: deaths takes no arguments: deaths [-n NAMESPACE | -A] [--since 24h] [-o text|wide|json]", errUsage)
	}
	if *output != "text" && *output != "wide" && *output != "json" {
		return fmt.Errorf("%w: -o %q: want text, wide or json", errUsage, *output)
	}
	if errs := validation.IsValidLabelValue(*job); len(errs) > 0 {
		return fmt.Errorf("%w: --job %q: %s", errUsage, *job, strings.Join(errs, "; "))
	}
	from := time.Now().Add(-*since)
	if *job != "" && !flagSet(fs, "since") {
		from = time.Time{}
	}
	c, ns, err := kf.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list := &v1alpha1.RunnerDeathList{}
	var opts []client.ListOption
	if !*all {
		opts = append(opts, client.InNamespace(ns))
	}
	if *job != "" {
		opts = append(opts, client.MatchingLabels{death.JobLabel: *job})
	}
	if err := c.List(ctx, list, opts...); err != nil {
		return fmt.Errorf("listing RunnerDeaths: %w", err)
	}
	s := report.Summarize(list.Items, from)
	return write(out, *output, s, func() string { return s.Table(*since, *output == "wide", *limit) })
}

// flagSet reports whether the flag named was given.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
