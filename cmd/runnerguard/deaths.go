package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/report"
)

// deaths answers "what kills our runners?": counts by class and the recent
// records, from the RunnerDeath objects.
func deaths(args []string, out io.Writer) error {
	fs := newFlagSet("deaths", "deaths [-n NAMESPACE | -A] [--since 24h] [-o text|wide|json]", out)
	var kf kubeFlags
	kf.bind(fs)
	all := fs.Bool("A", false, "all namespaces")
	fs.BoolVar(all, "all-namespaces", false, "all namespaces")
	since := fs.Duration("since", 24*time.Hour, "only deaths recorded within this long")
	output := fs.String("o", "text", "output: text, wide or json")
	limit := fs.Int("limit", 20, "recent records shown (text and wide)")
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
	if err := c.List(ctx, list, opts...); err != nil {
		return fmt.Errorf("listing RunnerDeaths: %w", err)
	}
	s := report.Summarize(list.Items, time.Now().Add(-*since))
	return write(out, *output, s, func() string { return s.Table(*since, *output == "wide", *limit) })
}
