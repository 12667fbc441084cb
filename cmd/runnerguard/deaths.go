package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/report"
)

// deathsOptions are deaths' own flags.
type deathsOptions struct {
	all bool
	// since: only the records written within it; 0, every record kept.
	// No window by default: retention already bounds what is kept, and a
	// window nobody asked for hides yesterday's deaths from the question
	// "what kills our runners?".
	since time.Duration
	limit int
	// job: only this CI job's records.
	job string
}

// newDeathsCommand is `deaths`: what kills the runners, counts by class
// and the recent records, from the RunnerDeath objects.
func newDeathsCommand(streams genericiooptions.IOStreams) *cobra.Command {
	var o deathsOptions
	cmd := &cobra.Command{
		Use:   "deaths",
		Short: "Tell what kills the runners: deaths and job ends by class, and the recent records",
		Long: `deaths counts the RunnerDeath records by class (runner deaths apart from
job ends, which are a job's normal end) and lists the most recent: every
record retention keeps, or those written within --since. The first line
says which. With -o json, yaml, name, jsonpath or custom-columns it prints
the same records as RunnerDeath objects.

Exit status: 0 listed (none found included); 1 the cluster could not be
read; 2 a usage error.`,
		Example: `  runnerguard deaths -n ci
  runnerguard deaths -A --since 24h -o wide
  runnerguard deaths -A --job 31885502817
  runnerguard deaths -A -o custom-columns=NAMESPACE:.metadata.namespace,POD:.record.pod,CLASS:.record.class`,
		Args:              positional(0, "deaths [-n NAMESPACE | -A] [--since DURATION] [-o ...]"),
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	k := newKube(cmd)
	out := newOutput(cmd)
	cmd.Flags().BoolVarP(&o.all, "all-namespaces", "A", false, "the records of every namespace")
	cmd.Flags().DurationVar(&o.since, "since", 0, "only records written within this long (default: every record retention keeps)")
	cmd.Flags().IntVar(&o.limit, "limit", 20, "recent records listed by the text for people")
	cmd.Flags().StringVar(&o.job, "job", "", "only the records of this CI job (its id, as the record names it)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := out.validate(); err != nil {
			return err
		}
		if cmd.Flags().Changed("since") && o.since <= 0 || o.limit < 0 {
			return usageErrorf("--since must be positive and --limit not negative")
		}
		if errs := validation.IsValidLabelValue(o.job); len(errs) > 0 {
			return usageErrorf("--job %q: %s", o.job, strings.Join(errs, "; "))
		}
		return failed(deaths(cmd.Context(), k, out, o, streams.Out))
	}
	return cmd
}

func deaths(ctx context.Context, k kube, out *output, o deathsOptions, w io.Writer) error {
	var opts []client.ListOption
	if !o.all {
		ns, err := k.namespace()
		if err != nil {
			return err
		}
		opts = append(opts, client.InNamespace(ns))
	}
	var from time.Time
	if o.since > 0 {
		from = time.Now().Add(-o.since)
	}
	if o.job != "" {
		opts = append(opts, client.MatchingLabels{death.JobLabel: o.job})
	}
	c, err := k.client()
	if err != nil {
		return err
	}
	list := &v1alpha1.RunnerDeathList{}
	if err := c.List(ctx, list, opts...); err != nil {
		return fmt.Errorf("listing RunnerDeaths: %w", err)
	}
	s := report.Summarize(list.Items, from)
	if human, wide := out.human(); human {
		_, err = io.WriteString(w, s.Table(o.since, wide, o.limit))
	} else {
		err = out.printRecords(w, s.Records)
	}
	if err != nil {
		return fmt.Errorf("printing: %w", err)
	}
	return nil
}
