// Command runnerguard serves the guard and injection webhooks and the pod
// watcher, and tells operators how a runner died. Installed as
// kubectl-runnerguard it is a kubectl plugin: kubectl runnerguard why POD.
//
//	runnerguard serve --config=/etc/runnerguard/config.yaml --cert-dir=DIR
//	runnerguard why POD [-n NAMESPACE] [-o wide|json|yaml|name|jsonpath=...|custom-columns=...]
//	runnerguard deaths [-n NAMESPACE | -A] [--since DURATION] [-o ...]
//	runnerguard refusals [POD] [-n NAMESPACE | -A] [--warned] [-o json|yaml]
//	runnerguard drain NODE... [--selector LABELS] [--deadline 2h --reason TEXT] [-o json|yaml]
//	runnerguard check [--wait DURATION] [-o json|yaml]
//	runnerguard version [-o json|yaml] | --version
//	runnerguard completion bash|zsh|fish|powershell
//
// The CLI is built as kubectl plugins are: cobra and pflag for commands and
// flags, k8s.io/cli-runtime for the kubeconfig flags and the printers.
// Every command that prints results takes -o json and yaml (output.go);
// every command that needs the installation finds it the same way, with
// --release and --runnerguard-namespace to choose (install.go).
// TestEveryCommandKeepsTheConvention holds each command to both, and to
// the exit codes below.
//
// Exit codes, which scripts may rely on, one scheme for every command: 0
// the command did what was asked, its outcome in its output (why: the pod
// has a death on record or in its status; drain: the nodes are drained,
// jobs the deadline ended included); 1 it could not (the API server could
// not be reached, refused the request, no kubeconfig); 2 a usage error
// (unknown command or flag, wrong arguments, an unknown output format); 3
// the cluster answered "no" (why: no death for the pod; refusals: the pod
// is gone with no record; check: something is wrong), the report printed
// all the same. drain adds 5 (--timeout passed) and 6 (refused, nothing
// changed).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"

	"github.com/runnerguard/runnerguard/internal/version"
)

// The exit codes (the package comment says what each means).
const (
	exitOK       = 0
	exitFailed   = 1
	exitUsage    = 2
	exitNoRecord = 3
	// exitUnhealthy: check asked, and something is wrong.
	exitUnhealthy = 3
)

// exitError is an error that ends the command with its code.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

func usageErrorf(format string, a ...any) error {
	return exitError{exitUsage, fmt.Errorf(format, a...)}
}

// errNoRecord ends why with exitNoRecord after its report is printed.
var errNoRecord = exitError{exitNoRecord, errors.New("no runner death is known for this pod")}

func main() {
	os.Exit(run(os.Args[1:], genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}))
}

// run is main without the exit.
func run(args []string, streams genericiooptions.IOStreams) int {
	root := newRootCommand(filepath.Base(os.Args[0]), streams)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	if errors.Is(err, errNoRecord) {
		return exitNoRecord // the report said it
	}
	fmt.Fprintf(streams.ErrOut, "error: %v\n", err)
	var e exitError
	if errors.As(err, &e) {
		return e.code
	}
	// What cobra refuses before a command runs: an unknown command or
	// flag, a flag's bad value, the wrong number of arguments.
	fmt.Fprintf(streams.ErrOut, "See '%s --help' for usage.\n", root.DisplayName())
	return exitUsage
}

// newRootCommand builds the command tree. binary is the executable's name:
// installed as kubectl-runnerguard, help and completion name it as kubectl
// runs it.
func newRootCommand(binary string, streams genericiooptions.IOStreams) *cobra.Command {
	name, display := "runnerguard", "runnerguard"
	if strings.HasPrefix(binary, "kubectl-") {
		name, display = "kubectl-runnerguard", "kubectl runnerguard"
	}
	root := &cobra.Command{
		Use:   name,
		Short: "Keep CI runner pods from being deleted mid-job, and tell how a runner died",
		Long: `runnerguard serves the admission webhooks that keep busy CI runner pods from
being deleted or evicted mid-job, records every runner's death, and tells
an operator how a runner died (why) and what kills the runners (deaths).`,
		Version:     version.Current().Version,
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: display},
		// Errors are printed once, by run, with the exit code they carry;
		// a failed command does not repeat its usage.
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetVersionTemplate(version.String() + "\n")
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	verbosity(root)
	serve := newServeCommand()
	// The plugin's users never run the server: the chart's Deployment
	// does, with the binary's own name.
	serve.Hidden = name == "kubectl-runnerguard"
	root.AddCommand(newWhyCommand(streams), newDeathsCommand(streams), newRefusalsCommand(streams), newDrainCommand(streams), newCheckCommand(streams), newVersionCommand(streams), serve)
	// Cobra's completion command, for bash, zsh, fish and powershell; a
	// shell it has no script for is a usage error, not its help.
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.RunE = func(*cobra.Command, []string) error {
				return usageErrorf("completion: name the shell: bash, zsh, fish or powershell")
			}
		}
	}
	return root
}

// verbosity is -v/--v LEVEL, as kubectl's: client-go's own log of the
// requests it sends (6 shows each request, 8 their bodies), on stderr. A
// kubectl user types -v for it; with it taken, cobra gives --version no
// shorthand.
func verbosity(root *cobra.Command) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	v := fs.Lookup("v")
	// klog's level is the process's: each command tree starts quiet.
	_ = v.Value.Set("0")
	v.Usage = "the log level of the requests sent to the API server, as kubectl's -v (6 shows each request)"
	root.PersistentFlags().AddGoFlag(v) // a one-letter Go flag is both -v and --v
}

// positional checks a command's argument count as a usage error.
func positional(n int, synopsis string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErrorf("%s takes %d argument(s), got %d: %s", cmd.Name(), n, len(args), synopsis)
		}
		return nil
	}
}

func newVersionCommand(streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:               "version",
		Short:             "Print the release, commit and build date",
		Args:              positional(0, "version [-o json|yaml]"),
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	out := newValueOutput(cmd, false, "the release, commit, build date and Go version")
	cmd.RunE = func(*cobra.Command, []string) error {
		if err := out.validate(); err != nil {
			return err
		}
		if human, _ := out.human(); !human {
			return out.printValue(streams.Out, buildInfo())
		}
		return printVersion(streams.Out)
	}
	return cmd
}

// failed marks what a command returns as a failure (exit 1), unless it
// already carries its code.
func failed(err error) error {
	var e exitError
	if err == nil || errors.As(err, &e) {
		return err
	}
	return exitError{exitFailed, err}
}
