package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/runnerguard/runnerguard/internal/version"
)

// The conventions of the tools its users live in (kubectl, git): help on
// stdout and exit 0, usage errors exit 2, failures exit 1. None of these
// reaches a cluster: $KUBECONFIG names a file that does not exist.
func TestRunExitCodes(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	t.Setenv("HOME", t.TempDir())
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{args: []string{"--help"}, code: 0, stdout: "Available Commands:"},
		{args: []string{"-h"}, code: 0, stdout: "why"},
		{args: []string{"help"}, code: 0, stdout: "deaths"},
		{args: nil, code: 0, stdout: "Usage:"},
		{args: []string{"--version"}, code: 0, stdout: version.String() + "\n"},
		{args: []string{"version"}, code: 0, stdout: version.String() + "\n"},
		{args: []string{"version", "--help"}, code: 0, stdout: "Print the release"},
		{args: []string{"frobnicate"}, code: 2, stderr: `unknown command "frobnicate"`},
		{args: []string{"why", "--help"}, code: 0, stdout: "why POD [flags]"},
		{args: []string{"why", "-h"}, code: 0, stdout: "-n, --namespace string"},
		{args: []string{"why", "-h"}, code: 0, stdout: "--as string"},
		{args: []string{"why", "-h"}, code: 0, stdout: "--request-timeout string"},
		{args: []string{"deaths", "--help"}, code: 0, stdout: "-A, --all-namespaces"},
		{args: []string{"deaths", "--help"}, code: 0, stdout: "-o, --output string"},
		{args: []string{"serve", "--help"}, code: 0, stdout: "--zap-log-level"},
		{args: []string{"serve", "--help"}, code: 0, stdout: "--review-budget-bytes int"},
		{args: []string{"completion", "--help"}, code: 0, stdout: "powershell"},
		{args: []string{"why"}, code: 2, stderr: "why takes 1 argument(s), got 0"},
		{args: []string{"why", "a", "b"}, code: 2, stderr: "why takes 1 argument(s), got 2"},
		{args: []string{"why", "--bogus", "p"}, code: 2, stderr: "unknown flag: --bogus"},
		{args: []string{"why", "p", "-o", "xml"}, code: 2, stderr: `-o xml: unable to match a printer suitable for the output format "xml"`},
		{args: []string{"why", "p", "-o", "custom-columns"}, code: 2, stderr: "-o custom-columns needs its columns"},
		{args: []string{"why", "p", "-o", "custom-columns=POD"}, code: 2, stderr: `column "POD": want HEADER:JSONPATH`},
		{args: []string{"deaths", "--since", "-1h"}, code: 2, stderr: "--since must be positive"},
		{args: []string{"deaths", "--since", "0s"}, code: 2, stderr: "--since must be positive"},
		{args: []string{"deaths", "--help"}, code: 0, stdout: "(default: every record retention keeps)"},
		{args: []string{"-v"}, code: 2, stderr: "flag needs an argument: 'v' in -v"},
		{args: []string{"-v", "6", "version"}, code: 0, stdout: version.String() + "\n"},
		{args: []string{"--v=6", "version"}, code: 0, stdout: version.String() + "\n"},
		{args: []string{"why", "-v=7", "--help"}, code: 0, stdout: "-v, --v Level"},
		{args: []string{"check", "--help"}, code: 0, stdout: "--wait duration"},
		{args: []string{"check", "--wait", "-1s"}, code: 2, stderr: "--wait must not be negative"},
		{args: []string{"check", "extra"}, code: 2, stderr: "check takes 0 argument(s), got 1"},
		{args: []string{"check"}, code: 1, stderr: "no kubeconfig"},
		{args: []string{"deaths", "extra"}, code: 2, stderr: "deaths takes 0 argument(s), got 1"},
		{args: []string{"deaths", "--since", "soon"}, code: 2, stderr: `invalid argument "soon"`},
		{args: []string{"serve", "--port", "many"}, code: 2, stderr: `invalid argument "many"`},
		{args: []string{"completion", "tcsh"}, code: 2, stderr: `unknown command "tcsh" for "runnerguard completion"`},
		{args: []string{"completion"}, code: 2, stderr: "completion: name the shell: bash, zsh, fish or powershell"},
		{args: []string{"drain", "--help"}, code: 0, stdout: "5 --timeout"},
		{args: []string{"drain", "--help"}, code: 0, stdout: "--ignore-daemonsets"},
		{args: []string{"drain"}, code: 2, stderr: "drain takes node names or --selector"},
		{args: []string{"drain", "node-7", "--deadline", "2h"}, code: 2, stderr: "give --reason"},
		{args: []string{"drain", "node-7", "--deadline", "soon", "--reason", "upgrade"}, code: 2, stderr: "neither a duration (2h, 90m) nor an RFC3339 time"},
		{args: []string{"drain", "node-7"}, code: 1, stderr: "no kubeconfig"},
		{args: []string{"why", "p", "-n", "ci"}, code: 1, stderr: "no kubeconfig"},
		{args: []string{"deaths", "-A", "-o", "yaml"}, code: 1, stderr: "no kubeconfig"},
		{args: []string{"refusals", "--help"}, code: 0, stdout: "refusals [POD] [flags]"},
		{args: []string{"refusals", "a", "b"}, code: 2, stderr: "refusals takes at most 1 argument, got 2"},
		{args: []string{"refusals", "-o", "xml"}, code: 2, stderr: `-o "xml": one of json, yaml`},
		{args: []string{"refusals", "-o", "yaml"}, code: 1, stderr: "no kubeconfig"},
		{args: []string{"check", "-o", "wide"}, code: 2, stderr: `-o "wide": one of json, yaml`},
		{args: []string{"drain", "node-7", "-o", "name"}, code: 2, stderr: `-o "name": one of json, yaml`},
		{args: []string{"version", "-o", "json"}, code: 0, stdout: `"version": "` + version.Current().Version + `"`},
		{args: []string{"check", "--help"}, code: 0, stdout: "list validatingwebhookconfigurations"},
		{args: []string{"refusals", "p", "-A"}, code: 2, stderr: "give -n, not -A"},
		{args: []string{"refusals", "-A"}, code: 1, stderr: "no kubeconfig"},
		{args: []string{"why", "p", "--kubeconfig", filepath.Join(t.TempDir(), "gone")}, code: 1, stderr: "gone"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &stdout, ErrOut: &stderr})
		assert.Equal(t, tc.code, code, "%v: stderr %s", tc.args, stderr.String())
		assert.Contains(t, stdout.String(), tc.stdout, "%v stdout", tc.args)
		assert.Contains(t, stderr.String(), tc.stderr, "%v stderr", tc.args)
	}
}

// With no kubeconfig anywhere, the message says where one is looked for,
// not client-go's KUBERNETES_MASTER hint.
func TestNoKubeconfigIsSaidPlainly(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	for _, args := range [][]string{{"why", "p"}, {"why", "p", "-n", "ci"}, {"deaths", "-A"}} {
		var stdout, stderr bytes.Buffer
		code := run(args, genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &stdout, ErrOut: &stderr})
		assert.Equal(t, 1, code, "%v", args)
		assert.Contains(t, stderr.String(), "no kubeconfig: runnerguard reads the cluster as kubectl does; pass --kubeconfig, set $KUBECONFIG, or write ~/.kube/config", "%v", args)
		assert.NotContains(t, stderr.String(), "KUBERNETES_MASTER", "%v", args)
	}
}

// Cobra's completion scripts, for each shell, name the binary as it was
// installed.
func TestCompletionScripts(t *testing.T) {
	for shell, want := range map[string]string{
		"bash":       "__start_runnerguard",
		"zsh":        "#compdef runnerguard",
		"fish":       "complete -c runnerguard",
		"powershell": "Register-ArgumentCompleter -CommandName 'runnerguard'",
	} {
		var stdout, stderr bytes.Buffer
		require.Equal(t, 0, run([]string{"completion", shell}, genericiooptions.IOStreams{Out: &stdout, ErrOut: &stderr}), stderr.String())
		assert.Contains(t, stdout.String(), want, shell)
	}
	var stdout bytes.Buffer
	root := newRootCommand("kubectl-runnerguard", genericiooptions.IOStreams{Out: &stdout, ErrOut: &stdout})
	root.SetArgs([]string{"completion", "bash"})
	require.NoError(t, root.Execute())
	assert.Contains(t, stdout.String(), "__start_kubectl-runnerguard")
	stdout.Reset()
	root.SetArgs([]string{"why", "--help"})
	require.NoError(t, root.Execute())
	assert.Contains(t, stdout.String(), "kubectl runnerguard why POD [flags]", "help names the plugin as kubectl runs it")
}

// The plugin's help lists what an operator runs, not the server the
// chart's Deployment runs; --version has no -v, which is kubectl's
// verbosity.
func TestThePluginsHelpHidesServe(t *testing.T) {
	help := func(binary string) string {
		var stdout bytes.Buffer
		root := newRootCommand(binary, genericiooptions.IOStreams{Out: &stdout, ErrOut: &stdout})
		root.SetArgs([]string{"--help"})
		require.NoError(t, root.Execute())
		return stdout.String()
	}
	plugin := help("kubectl-runnerguard")
	assert.NotRegexp(t, `\n  serve\s`, plugin)
	assert.Regexp(t, `\n  check\s`, plugin)
	assert.Contains(t, plugin, "      --version")
	assert.NotContains(t, plugin, "-v, --version")
	assert.Contains(t, plugin, "-v, --v Level")
	assert.Regexp(t, `\n  serve\s`, help("runnerguard"), "the image's binary still lists it")
}

// Completion offers the output formats and, for -n and POD, what the
// cluster holds (nothing when it cannot be read).
func TestFlagCompletion(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"__complete", "deaths", "-o", ""}, genericiooptions.IOStreams{Out: &stdout, ErrOut: &stderr}), stderr.String())
	for _, want := range []string{"wide\n", "json\n", "yaml\n", "name\n", "jsonpath\n", "custom-columns\n", ":4\n"} {
		assert.Contains(t, stdout.String(), want)
	}
	stdout.Reset()
	require.Equal(t, 0, run([]string{"__complete", "why", ""}, genericiooptions.IOStreams{Out: &stdout, ErrOut: &stderr}), stderr.String())
	assert.Equal(t, ":4\n", firstLine(t, stdout.String()), "no pods, and no file names")
}

func firstLine(t *testing.T, s string) string {
	t.Helper()
	i := bytes.IndexByte([]byte(s), '\n')
	require.GreaterOrEqual(t, i, 0, s)
	return s[:i+1]
}

func TestMain(m *testing.M) {
	// Help and completion name the binary from os.Args[0]; the test
	// binary is runnerguard.test.
	os.Args[0] = "runnerguard"
	os.Exit(m.Run())
}

// serve's flags are the chart's contract: every flag its Deployment and
// the e2e servers pass parses, to the value given.
func TestServeTakesTheChartsFlags(t *testing.T) {
	cmd := newServeCommand()
	require.NoError(t, cmd.ParseFlags([]string{
		"--config=/etc/runnerguard/config.yaml", "--cert-dir=/var/run/secrets/runnerguard/tls", "--port=9443",
		"--metrics-bind-address=:8443", "--metrics-secure=false", "--health-probe-bind-address=:8081", "--zap-log-level=info",
		"--leader-elect", "--namespace-selector=runnerguard.io/enabled=true,kubernetes.io/metadata.name notin (kube-system)",
		"--stuck-after=10m", "--watch=false", "--leader-election-namespace=rg", "--pprof-bind-address=127.0.0.1:6060",
		"--kubeconfig=/k", "--label-interval=2m", "--review-budget-bytes=8388608", "--metrics-cert-dir=/m", "--zap-log-level=2",
	}))
	for flag, want := range map[string]string{
		"config": "/etc/runnerguard/config.yaml", "cert-dir": "/var/run/secrets/runnerguard/tls", "port": "9443",
		"metrics-bind-address": ":8443", "metrics-secure": "false", "health-probe-bind-address": ":8081", "leader-elect": "true",
		"namespace-selector": "runnerguard.io/enabled=true,kubernetes.io/metadata.name notin (kube-system)", "stuck-after": "10m0s",
		"watch": "false", "leader-election-namespace": "rg", "pprof-bind-address": "127.0.0.1:6060", "kubeconfig": "/k",
		"label-interval": "2m0s", "review-budget-bytes": "8388608", "metrics-cert-dir": "/m", "zap-log-level": "2",
	} {
		assert.Equal(t, want, cmd.Flags().Lookup(flag).Value.String(), flag)
	}
}
