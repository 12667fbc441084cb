// Command runnerguard serves the guard and injection webhooks and the pod
// watcher, and tells operators how a runner died. Installed as
// kubectl-runnerguard it is a kubectl plugin: kubectl runnerguard why POD.
//
//	runnerguard serve --config=/etc/runnerguard/config.yaml --cert-dir=DIR
//	runnerguard why POD [-n NAMESPACE] [-o text|json|yaml]
//	runnerguard deaths [-n NAMESPACE | -A] [--since 24h] [-o text|wide|json]
//	runnerguard version
//	runnerguard completion bash|zsh
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// command is one subcommand: its one-line summary and what runs it.
type command struct {
	summary string
	run     func(args []string, out io.Writer) error
}

var commands = map[string]command{
	"serve":      {"serve the guard (validating) and inject (mutating) webhooks and the pod watcher", func(args []string, _ io.Writer) error { return serve(args) }},
	"why":        {"how a runner pod's runner died: why POD [-n NAMESPACE] [-o text|json|yaml]", why},
	"deaths":     {"what kills the runners, counts by class and recent records: deaths [-n NAMESPACE | -A] [--since 24h] [-o text|wide|json]", deaths},
	"version":    {"the release, commit and build date", func(_ []string, out io.Writer) error { return printVersion(out) }},
	"completion": {"a shell completion script: completion bash|zsh", completion},
}

// order is how usage lists the commands.
var order = []string{"why", "deaths", "version", "completion", "serve"}

// name is how the user invoked us: "kubectl runnerguard" as a plugin.
func name() string {
	if strings.HasPrefix(filepath.Base(os.Args[0]), "kubectl-") {
		return "kubectl runnerguard"
	}
	return "runnerguard"
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s <command> [flags]\n\nCommands:\n", name())
	for _, c := range order {
		fmt.Fprintf(w, "  %-11s %s\n", c, commands[c].summary)
	}
	fmt.Fprintf(w, "\n%s <command> --help shows a command's flags.\n", name())
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is main without the exit: 0 on success and on --help, 1 when a
// command fails, 2 on a usage error.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		usage(stdout)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "%s: unknown command %q\n\n", name(), args[0])
		usage(stderr)
		return 2
	}
	err := c.run(args[1:], stdout)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		// The flag package printed the command's usage.
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "%s: %v\n", name(), err)
		return 2
	}
	fmt.Fprintf(stderr, "%s: %v\n", name(), err)
	return 1
}

// errUsage marks a wrong invocation: exit 2, as for an unknown flag.
var errUsage = errors.New("usage")

// newFlagSet is a command's flag set: its usage (on -h or --help) goes to
// stdout, so `runnerguard why --help | less` works, and a wrong flag is a
// usage error.
func newFlagSet(cmd, synopsis string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "usage: %s %s\n\nFlags:\n", name(), synopsis)
		fs.PrintDefaults()
	}
	return fs
}
