package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/runnerguard/runnerguard/internal/report"
)

const whySynopsis = "why POD [-n NAMESPACE] [-o wide|json|yaml|name|jsonpath=...|custom-columns=...]"

// newWhyCommand is `why POD`: the death records of one pod, alive or gone.
func newWhyCommand(streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "why POD",
		Short: "Tell how a runner pod's runner died, from its records and, while it exists, its status",
		Long: `why prints what is known of a pod's runner deaths: the RunnerDeath records
runnerguard's pod watcher wrote (they outlive the pod until retention
removes them) and, while the pod exists, the deaths its status shows that
are not on record yet. It never reads Events: anyone who may create an
Event could have written one. It tells a live pod's runner by the
presets of the installation's ConfigMap (--release,
--runnerguard-namespace, or --config's), else by every preset's defaults.

Exit status: 0 a death is known; 3 none is (the pod is gone and no record
of it is left, or its runner has not died), the report printed all the
same; 1 the cluster could not be read; 2 a usage error.`,
		Example: `  runnerguard why runner-abc12 -n ci
  runnerguard why runner-abc12 -n ci -o yaml
  runnerguard why runner-abc12 -n ci -o jsonpath='{.items[*].record.class}'`,
		Args: positional(1, whySynopsis),
	}
	k := newKube(cmd)
	out := newOutput(cmd)
	in := newInstallFlags(cmd, true)
	cmd.ValidArgsFunction = k.completePods
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := out.validate(); err != nil {
			return err
		}
		return failed(why(cmd.Context(), k, out, in, args[0], streams.Out))
	}
	return cmd
}

func why(ctx context.Context, k kube, out *output, in *installFlags, pod string, w io.Writer) error {
	presets, err := k.presets(ctx, in)
	if err != nil {
		return err
	}
	ns, err := k.namespace()
	if err != nil {
		return err
	}
	c, err := k.client()
	if err != nil {
		return err
	}
	rep, err := report.Lookup(ctx, c, presets, ns, pod)
	if err != nil {
		return err
	}
	switch human, wide := out.human(); {
	case wide && len(rep.Records) > 0:
		_, err = io.WriteString(w, report.RecordsTable(rep.Records, true, len(rep.Records)))
	case human:
		_, err = io.WriteString(w, rep.Text())
	default:
		err = out.printRecords(w, rep.Records)
	}
	if err != nil {
		return fmt.Errorf("printing: %w", err)
	}
	if len(rep.Records) == 0 {
		return errNoRecord
	}
	return nil
}
