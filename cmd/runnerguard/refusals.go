package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/report"
)

const refusalsSynopsis = "refusals [POD] [-n NAMESPACE | -A] [--warned] [-o json]"

// refusalsOptions are refusals' own flags.
type refusalsOptions struct {
	all        bool
	warned     bool
	output     string
	configPath string
}

// newRefusalsCommand is `refusals [POD]`: who the guard refused, and what,
// on the live runner pods and on the records of those that died.
func newRefusalsCommand(streams genericiooptions.IOStreams) *cobra.Command {
	var o refusalsOptions
	cmd := &cobra.Command{
		Use:   "refusals [POD]",
		Short: "List who was refused a delete, eviction, exec or attach of a runner (or let through by warn mode), how often and when",
		Long: `refusals lists what runnerguard's guard refused on the runner pods of a
namespace (or of one pod): one line per requester, verb and answer, with
the count, the first and the latest time and the rule. runnerguard keeps
them on the live pod itself, where only it may write them, so they
outlive the Events; when the runner dies they are copied onto its
RunnerDeath record, and are listed from there (RUNNER died).

In warn mode nothing is refused: what enforce would have refused is kept
the same way, answered "warned" (a deletion warn mode let through is on
the runner's record). --warned lists only those: the rollout's question,
what enforce would have refused this week.

Exit status: 0 listed (none found included); 1 the cluster could not be
read; 2 a usage error; 3 the pod named is gone and no record of it keeps
refusals.`,
		Example: `  runnerguard refusals -n ci
  runnerguard refusals runner-abc12 -n ci
  runnerguard refusals -A --warned
  runnerguard refusals -A -o json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErrorf("refusals takes at most 1 argument, got %d: %s", len(args), refusalsSynopsis)
			}
			return nil
		},
	}
	k := newKube(cmd)
	cmd.Flags().BoolVarP(&o.all, "all-namespaces", "A", false, "the runner pods and records of every namespace")
	cmd.Flags().BoolVar(&o.warned, "warned", false, "only what warn mode let through that enforce would have refused")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: json, or none for the text for people")
	cmd.Flags().StringVar(&o.configPath, "config", "", "runnerguard config file, for non-default presets")
	cmd.ValidArgsFunction = k.completePods
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if o.output != "" && o.output != "json" {
			return usageErrorf("-o %q: refusals prints json, or the text for people without -o", o.output)
		}
		if o.all && len(args) > 0 {
			return usageErrorf("a pod is named in one namespace: give -n, not -A")
		}
		pod := ""
		if len(args) == 1 {
			pod = args[0]
		}
		return failed(refusals(cmd.Context(), k, o, pod, streams.Out))
	}
	return cmd
}

// errPodGone ends refusals with exitNoRecord once it has said so.
var errPodGone = exitError{exitNoRecord, errors.New("the pod is gone, and no record of it keeps refusals (runnerguard why POD)")}

func refusals(ctx context.Context, k kube, o refusalsOptions, pod string, w io.Writer) error {
	// Without the chart's config every preset's pods are runners: the
	// chart's policy guards the value on each preset's runner containers.
	cfg := allPresets()
	if o.configPath != "" {
		var err error
		if cfg, err = config.Load(o.configPath); err != nil {
			return err
		}
	}
	ns := ""
	if !o.all {
		var err error
		if ns, err = k.namespace(); err != nil {
			return err
		}
	}
	c, err := k.client()
	if err != nil {
		return err
	}
	pods, err := report.Refusals(ctx, c, cfg.Presets, ns, pod)
	gone := errors.Is(err, report.ErrPodGone)
	if err != nil && !gone {
		return err
	}
	dead, err := report.DeadRefusals(ctx, c, ns, pod)
	if err != nil {
		return err
	}
	if gone && len(dead) == 0 {
		return errPodGone
	}
	pods = append(pods, dead...)
	if o.warned {
		pods = report.OnlyWarned(pods)
	}
	if o.output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if pods == nil {
			pods = []report.PodRefusals{}
		}
		err = enc.Encode(pods)
	} else {
		_, err = io.WriteString(w, report.RefusalsTable(pods))
	}
	if err != nil {
		return fmt.Errorf("printing: %w", err)
	}
	return nil
}
