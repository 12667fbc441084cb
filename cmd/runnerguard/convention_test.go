package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/runnerguard/runnerguard/internal/drain"
)

// answer is how a command is run against the fake API server to get the
// cluster's "no", and the code that no is.
type answer struct {
	args []string
	// no is the exit code of the cluster's "no"; exitOK for a command
	// whose every answer is a listing (none found included).
	no int
	// offline: the command never reads the cluster.
	offline bool
}

// answers is every command that prints results. A command added without
// an entry here fails TestEveryCommandKeepsTheConvention.
var answers = map[string]answer{
	"runnerguard why":      {args: []string{"why", "gone", "-n", "ci"}, no: exitNoRecord},
	"runnerguard refusals": {args: []string{"refusals", "gone", "-n", "ci"}, no: exitNoRecord},
	"runnerguard check":    {args: []string{"check"}, no: exitUnhealthy},
	// drain's "no" is its refusal: the fake's access reviews allow
	// nothing.
	"runnerguard drain":   {args: []string{"drain", "node-7"}, no: drain.ExitRefused},
	"runnerguard deaths":  {args: []string{"deaths", "-n", "ci"}, no: exitOK},
	"runnerguard version": {args: []string{"version"}, offline: true},
}

// printsNothing are the commands that print no results, and why.
var printsNothing = map[string]string{
	"runnerguard":            "the root prints its help",
	"runnerguard help":       "prints help",
	"runnerguard serve":      "the webhook server: what it prints is its log",
	"runnerguard completion": "prints a shell's completion script",
}

// needsNoInstall are the commands that read the cluster without needing
// runnerguard's installation, and why.
var needsNoInstall = map[string]string{
	"runnerguard deaths": "reads only the RunnerDeath records, which name their own presets",
	"runnerguard serve":  "is the installation: the chart passes its --config",
}

// The CLI's one convention, kubectl's, held over every command the tree
// has, so a command added or changed later is held to it too: --help
// exits 0 and an unknown flag 2; a command that prints results takes -o
// json and yaml, and prints a document in each even when the answer is
// no; a command that needs the installation finds it by the same flags
// with the same defaults; against a fake API server the cluster's "no"
// exits as the package comment says, and a server that cannot be reached
// exits 1.
func TestEveryCommandKeepsTheConvention(t *testing.T) {
	root := newRootCommand("runnerguard", genericiooptions.NewTestIOStreamsDiscard())
	root.InitDefaultHelpCmd()
	reference := newInstallFlagsReference()
	for _, cmd := range walk(root) {
		path := cmd.CommandPath()
		args := strings.Fields(path)[1:]
		t.Run(path, func(t *testing.T) {
			code, _, _ := runArgs(append(args, "--help"))
			assert.Equal(t, exitOK, code, "--help")
			code, _, stderr := runArgs(append(args, "--no-such-flag"))
			assert.Equal(t, exitUsage, code, "an unknown flag: %s", stderr)

			if cmd.Flags().Lookup("kubeconfig") != nil {
				findsTheInstall(t, cmd, reference)
			}
			a, prints := answers[path]
			if printsNoResults(cmd) {
				require.False(t, prints, "a command in printsNothing has an answer")
				return
			}
			require.True(t, prints, "%s prints results: add its answer to answers (or it to printsNothing, saying why)", path)
			outputFlag(t, cmd)
			answersOnAFakeServer(t, a)
		})
	}
}

// printsNoResults: cmd, or the command it is part of (completion's
// shells), is in printsNothing.
func printsNoResults(cmd *cobra.Command) bool {
	if _, ok := printsNothing[cmd.CommandPath()]; ok {
		return true
	}
	p := cmd.Parent()
	return p != nil && p.HasParent() && printsNoResults(p)
}

// walk is every command under root, root included; cobra's own hidden
// completion commands are not the CLI's.
func walk(root *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{root}
	for _, c := range root.Commands() {
		if !strings.HasPrefix(c.Name(), "__") {
			out = append(out, walk(c)...)
		}
	}
	return out
}

// outputFlag: -o, --output, offering json and yaml.
func outputFlag(t *testing.T, cmd *cobra.Command) {
	t.Helper()
	f := cmd.Flags().Lookup("output")
	require.NotNil(t, f, "-o/--output")
	assert.Equal(t, "o", f.Shorthand)
	assert.True(t, strings.HasPrefix(f.Usage, outputUsage), "-o's help lists its formats: %s", f.Usage)
	complete := append([]string{"__complete"}, strings.Fields(cmd.CommandPath())[1:]...)
	_, stdout, _ := runArgs(append(complete, "-o", ""))
	for _, format := range []string{"json\n", "yaml\n"} {
		assert.Contains(t, stdout, format, "-o completes %s", format)
	}
}

// findsTheInstall: a command that reads the cluster finds the installation
// by the same flags, with the same defaults and help, as every other.
func findsTheInstall(t *testing.T, cmd *cobra.Command, reference *cobra.Command) {
	t.Helper()
	if why, ok := needsNoInstall[cmd.CommandPath()]; ok {
		t.Logf("needs no installation: %s", why)
		return
	}
	for _, name := range []string{releaseFlag, namespaceFlag} {
		f, want := cmd.Flags().Lookup(name), reference.Flags().Lookup(name)
		if assert.NotNil(t, f, "--%s: it reads the cluster (or add it to needsNoInstall, saying why)", name) {
			assert.Equal(t, want.DefValue, f.DefValue, "--%s's default", name)
			assert.Equal(t, want.Usage, f.Usage, "--%s's help", name)
		}
	}
	if f := cmd.Flags().Lookup(configFlag); f != nil {
		assert.Equal(t, reference.Flags().Lookup(configFlag).Usage, f.Usage, "--config's help")
		assert.Empty(t, f.DefValue, "--config's default")
	}
}

func newInstallFlagsReference() *cobra.Command {
	c := &cobra.Command{}
	newInstallFlags(c, true)
	return c
}

// answersOnAFakeServer: the cluster's "no" exits with the command's code,
// the report printed all the same (a document for -o json and yaml), and
// a server that cannot be reached exits 1.
func answersOnAFakeServer(t *testing.T, a answer) {
	t.Helper()
	f := newFakeAPI()
	f.add("/api/v1/nodes/node-7", &corev1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "node-7"}})
	serveFake(t, f)
	code, _, stderr := runArgs(a.args)
	assert.Equal(t, a.no, code, "no -o: %s", stderr)
	code, stdout, stderr := runArgs(append(a.args, "-o", "json"))
	assert.Equal(t, a.no, code, "-o json: %s", stderr)
	assert.True(t, json.Valid([]byte(stdout)), "-o json prints one JSON document: %q", stdout)
	code, stdout, stderr = runArgs(append(a.args, "-o", "yaml"))
	assert.Equal(t, a.no, code, "-o yaml: %s", stderr)
	var doc any
	assert.NoError(t, yaml.Unmarshal([]byte(stdout), &doc), "-o yaml prints YAML")
	assert.NotNil(t, doc, "-o yaml prints a document: %q", stdout)
	code, _, stderr = runArgs(append(a.args, "-o", "xml"))
	assert.Equal(t, exitUsage, code, "-o xml: %s", stderr)

	if a.offline {
		return
	}
	unreachable(t)
	code, _, stderr = runArgs(a.args)
	assert.Equal(t, exitFailed, code, "unreachable: %s", stderr)
	assert.Contains(t, stderr, "connection refused")
}

func runArgs(args []string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &stdout, ErrOut: &stderr})
	return code, stdout.String(), stderr.String()
}

// drain -o json prints the outcome node by node, the log on stderr: here
// a refusal, which names what is missing and changes nothing.
func TestADrainsOutcomePrintsAsAStructure(t *testing.T) {
	f := newFakeAPI()
	f.add("/api/v1/nodes/node-7", &corev1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "node-7"}})
	serveFake(t, f)
	code, stdout, stderr := runArgs([]string{"drain", "node-7", "-o", "json"})
	require.Equal(t, drain.ExitRefused, code, stderr)
	var rep drain.Report
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep), stdout)
	assert.Equal(t, "refused", rep.Result)
	assert.Equal(t, []string{`you may not patch nodes on "node-7" (to cordon the node)`}, rep.Refusals)
	require.Len(t, rep.Nodes, 1)
	assert.Equal(t, drain.NodeReport{Name: "node-7", Pods: []drain.PodReport{}}, rep.Nodes[0])
	assert.Contains(t, rep.Presets, "every preset's defaults")
	assert.Contains(t, stderr, `refused: you may not patch nodes on "node-7"`, "the log is on stderr")
}
