package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/runnerguard/runnerguard/internal/report"
)

const refusalsSynopsis = "refusals [POD] [-n NAMESPACE | -A] [--warned] [-o json|yaml]"

// refusalsOptions are refusals' flags.
type refusalsOptions struct {
	all     bool
	warned  bool
	out     *output
	install *installFlags
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
what enforce would have refused this week. It tells runner pods by the
presets of the installation's ConfigMap (--release,
--runnerguard-namespace, or --config's), else by every preset's defaults.

-o json or yaml prints a list of pods, each with its refusals.

Exit status: 0 listed (none found included); 1 the cluster could not be
read; 2 a usage error; 3 the pod named is gone and no record of it keeps
refusals.`,
		Example: `  runnerguard refusals -n ci
  runnerguard refusals runner-abc12 -n ci
  runnerguard refusals -A --warned
  runnerguard refusals -A -o yaml`,
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
	o.install = newInstallFlags(cmd, true)
	o.out = newValueOutput(cmd, false, "a list of pods, each with its refusals")
	cmd.ValidArgsFunction = k.completePods
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := o.out.validate(); err != nil {
			return err
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
	// Without the installation's config every preset's pods are runners:
	// the chart's policy guards the value on each preset's runner
	// containers.
	presets, err := k.presets(ctx, o.install)
	if err != nil {
		return err
	}
	ns := ""
	if !o.all {
		if ns, err = k.namespace(); err != nil {
			return err
		}
	}
	c, err := k.client()
	if err != nil {
		return err
	}
	pods, err := report.Refusals(ctx, c, presets, ns, pod)
	gone := errors.Is(err, report.ErrPodGone)
	if err != nil && !gone {
		return err
	}
	dead, err := report.DeadRefusals(ctx, c, ns, pod)
	if err != nil {
		return err
	}
	pods = append(pods, dead...)
	if o.warned {
		pods = report.OnlyWarned(pods)
	}
	human, _ := o.out.human()
	switch {
	case !human:
		// A script reads a list, empty for a pod gone without a record.
		if pods == nil {
			pods = []report.PodRefusals{}
		}
		err = o.out.printValue(w, pods)
	case !gone || len(dead) > 0:
		_, err = io.WriteString(w, report.RefusalsTable(pods))
	}
	if err != nil {
		return fmt.Errorf("printing: %w", err)
	}
	if gone && len(dead) == 0 {
		return errPodGone
	}
	return nil
}
