package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/runnerguard/runnerguard/internal/check"
)

// checkOptions are check's own flags.
type checkOptions struct {
	wait time.Duration
}

// checkInterval is how often --wait asks again.
const checkInterval = 2 * time.Second

// newCheckCommand is `check`: does the API server reach the guard and the
// injector, is the certificate ready, which namespaces and presets are on.
func newCheckCommand(streams genericiooptions.IOStreams) *cobra.Command {
	var o checkOptions
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Prove the API server reaches the guard and the injector, and the certificate is ready",
		Long: `check asks each webhook a question only it answers, as a server-side dry
run that changes nothing: the guard, a dry-run eviction of a pod that does
not exist; the injector, a dry-run runner pod of each preset's shape. It
reads cert-manager's Certificate of the webhooks, the opted-in namespaces
with the guard's mode in each, and which presets the injector matches.

It finds the installation by the chart's label on its
ValidatingWebhookConfiguration; --release and --runnerguard-namespace
choose when the cluster has several.

It needs: list validatingwebhookconfigurations and get
mutatingwebhookconfigurations (admissionregistration.k8s.io); list
namespaces; in the release's namespace, get certificates.cert-manager.io
and list endpointslices (discovery.k8s.io); create pods and pods/eviction
in the namespace it probes (-n, else the first opted-in one), as dry runs;
list poddisruptionbudgets (policy) and pods in the opted-in namespaces, for
its warnings.

Warnings (exit status 0): the operator's off switch on, opted-in
namespaces that allow privileged pods, others' PodDisruptionBudgets over
runner pods.

-o json or yaml prints ok, the problems, the warnings and what was found.

Exit status: 0 all is well; 3 something is wrong (said in one line); 1 the
cluster could not be asked; 2 a usage error.`,
		Example: `  kubectl runnerguard check
  kubectl runnerguard check --wait 2m      # after helm install, until it is green
  kubectl runnerguard check -n ci --release runnerguard
  kubectl runnerguard check -o yaml`,
		Args:              positional(0, "check [--wait DURATION] [--release NAME] [-n NAMESPACE] [-o json|yaml]"),
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	k := newKube(cmd)
	cmd.Flags().DurationVar(&o.wait, "wait", 0, "ask again every 2s until all is well or this long has passed")
	in := newInstallFlags(cmd, false)
	out := newValueOutput(cmd, false, "ok, the problems, the warnings and what was found")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if o.wait < 0 {
			return usageErrorf("--wait must not be negative")
		}
		if err := out.validate(); err != nil {
			return err
		}
		opts := check.Options{Release: in.release, Namespace: in.namespace}
		if cmd.Flags().Changed("namespace") {
			opts.ProbeNamespace = *k.flags.Namespace
		}
		return failed(runCheck(cmd.Context(), k, opts, o.wait, out, streams))
	}
	return cmd
}

// runCheck gathers and judges until all is well or the wait is over, then
// prints the report; the first problem is the error.
func runCheck(ctx context.Context, k kube, opts check.Options, wait time.Duration, out *output, streams genericiooptions.IOStreams) error {
	cfg, err := k.restConfig()
	if err != nil {
		return err
	}
	clients, err := check.NewClients(cfg)
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	deadline := time.Now().Add(wait)
	last := ""
	for {
		facts, err := check.Gather(ctx, clients, opts)
		if err != nil {
			return err
		}
		v := check.Judge(facts)
		if v.OK() || !time.Now().Add(checkInterval).Before(deadline) {
			if human, _ := out.human(); !human {
				return printCheckValue(streams.Out, out, facts, v)
			}
			return printCheck(streams.Out, facts, v)
		}
		if v.Problems[0] != last {
			last = v.Problems[0]
			fmt.Fprintf(streams.ErrOut, "not yet: %s\n", last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(checkInterval):
		}
	}
}

func printCheck(w io.Writer, f check.Facts, v check.Verdict) error {
	if _, err := io.WriteString(w, check.Report(f)); err != nil {
		return err
	}
	for _, warning := range v.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warning)
	}
	if v.OK() {
		_, err := fmt.Fprintln(w, "ok: the API server reaches the guard and the injector, and the certificate is ready")
		return err
	}
	for _, p := range v.Problems[1:] {
		fmt.Fprintf(w, "also: %s\n", p)
	}
	return exitError{exitUnhealthy, errors.New(v.Problems[0])}
}

// printCheckValue prints what check found and judged, for scripts: the
// exit status is the same as the text's.
func printCheckValue(w io.Writer, out *output, f check.Facts, v check.Verdict) error {
	if err := out.printValue(w, struct {
		OK bool `json:"ok"`
		check.Verdict
		Facts check.Facts `json:"facts"`
	}{v.OK(), v, f}); err != nil {
		return err
	}
	if !v.OK() {
		return exitError{exitUnhealthy, errors.New(v.Problems[0])}
	}
	return nil
}
