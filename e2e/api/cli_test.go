//go:build e2e

package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/podtest"
)

// runCLI runs the runnerguard binary with env added to this process's,
// and returns its stdout, stderr and exit code.
func runCLI(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	return runCmd(t, exec.Command(server.Binary(), args...), env)
}

func runCmd(t *testing.T, cmd *exec.Cmd, env []string) (string, string, int) {
	t.Helper()
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out.String(), errOut.String(), exit.ExitCode()
	}
	require.NoError(t, err, "running %v", cmd.Args)
	return out.String(), errOut.String(), 0
}

// plugin installs the binary as a kubectl plugin, with the completion
// script the krew archive ships, in a directory of its own, and returns
// what runs a real kubectl with that directory first on PATH and the
// admin's kubeconfig.
func plugin(t *testing.T) func(args ...string) (string, string, int) {
	t.Helper()
	kubectl, env := pluginEnv(t)
	return func(args ...string) (string, string, int) {
		t.Helper()
		return runCmd(t, exec.Command(kubectl, args...), env)
	}
}

// pluginEnv is plugin's kubectl and the environment it runs in.
func pluginEnv(t *testing.T) (string, []string) {
	t.Helper()
	kubectl := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("kubectl is built by make kube-bin: %v", err)
	}
	dir := t.TempDir()
	b, err := os.ReadFile(server.Binary())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kubectl-runnerguard"), b, 0o755))
	script, err := os.ReadFile(filepath.Join("..", "..", "hack", "krew", "kubectl_complete-runnerguard"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kubectl_complete-runnerguard"), script, 0o755))
	return kubectl, []string{"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH"), "KUBECONFIG=" + adminKubeconfig}
}

// Installed as kubectl-runnerguard, the binary is a kubectl plugin: a real
// kubectl finds it on PATH and hands it the arguments a kubectl user types,
// and completes its commands, flags and pods.
func TestTheKubectlPluginFindsADeath(t *testing.T) {
	kc := plugin(t)
	ns := newNamespace(t, nil)
	pod := create(t, nil, busyRunner(ns, "plugged"))
	setStatus(t, pod, podtest.Runner(ns, "plugged").Terminated("runner", 137, "OOMKilled").Obj().Status)
	r := oneDeath(t, pod)
	create(t, nil, busyRunner(ns, "alive"))

	out, _, code := kc("plugin", "list")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "kubectl-runnerguard")

	out, errOut, code := kc("runnerguard", "why", "plugged", "-n", ns)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `runner "runner" died: cgroup-oom`)
	out, errOut, code = kc("runnerguard", "why", "plugged", "--namespace", ns, "-o", "wide")
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, ns+`\s+plugged\s+cgroup-oom\s+137\s+OOMKilled\s+-\s+\S+\s+\S+\s+generic`, out)

	out, errOut, code = kc("runnerguard", "deaths", "--namespace", ns)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "1 runner death and 0 job ends on record\n")
	out, errOut, code = kc("runnerguard", "deaths", "--namespace", ns, "-o", "wide")
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, ns+`\s+plugged\s+cgroup-oom\s+137\s+OOMKilled`, out)

	// Every machine format prints the RunnerDeath objects, on both
	// commands: what `kubectl get runnerdeaths` prints.
	for _, cmd := range [][]string{{"why", "plugged"}, {"deaths"}} {
		args := append([]string{"runnerguard"}, append(cmd, "-n", ns)...)
		out, errOut, code = kc(append(args, "-o", "json")...)
		require.Equal(t, 0, code, errOut)
		var list v1alpha1.RunnerDeathList
		require.NoError(t, json.Unmarshal([]byte(out), &list), out)
		require.Len(t, list.Items, 1, "%v", cmd)
		assert.Equal(t, r.Name(), list.Items[0].Name)
		assert.Equal(t, "RunnerDeath", list.Items[0].Kind)
		assert.Equal(t, string(death.CgroupOOM), list.Items[0].Record.Class)

		out, errOut, code = kc(append(args, "-o", "yaml")...)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "kind: RunnerDeathList")
		assert.Contains(t, out, "class: cgroup-oom")

		out, errOut, code = kc(append(args, "-o", "name")...)
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, "runnerdeath.runnerguard.io/"+r.Name()+"\n", out, "%v", cmd)

		out, errOut, code = kc(append(args, "-o", "jsonpath={.items[*].record.exitCode}")...)
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, "137", out, "%v", cmd)

		out, errOut, code = kc(append(args, "-o", "custom-columns=POD:.record.pod,CLASS:.record.class")...)
		require.Equal(t, 0, code, errOut)
		assert.Regexp(t, `^POD\s+CLASS\nplugged\s+cgroup-oom\n$`, out, "%v", cmd)

		out, errOut, code = kc(append(args, "-o", "xml")...)
		assert.Equal(t, 2, code, "an unknown format is a usage error: %s", out)
		assert.Contains(t, errOut, `unable to match a printer suitable for the output format "xml"`)
	}

	// Exit codes: 3 when no death is known, the report printed all the
	// same; 2 for a usage error; 1 when the cluster cannot be read.
	out, _, code = kc("runnerguard", "why", "never-was", "-n", ns)
	assert.Equal(t, 3, code)
	assert.Contains(t, out, "pod "+ns+"/never-was is gone and no runnerguard record of it remains")
	out, _, code = kc("runnerguard", "why", "alive", "-n", ns, "-o", "json")
	assert.Equal(t, 3, code)
	assert.Contains(t, out, `"items": []`)
	_, errOut, code = kc("runnerguard", "why", "-n", ns)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "why takes 1 argument(s), got 0")
	_, errOut, code = kc("runnerguard", "deaths", "--frobnicate")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "unknown flag: --frobnicate")
	_, errOut, code = kc("runnerguard", "deaths", "-n", ns, "--server", "https://127.0.0.1:1")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "127.0.0.1:1")
	_, errOut, code = runCLI(t, []string{"KUBECONFIG=" + filepath.Join(t.TempDir(), "none"), "HOME=" + t.TempDir()}, "why", "plugged", "-n", ns)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "no kubeconfig: runnerguard reads the cluster as kubectl does")
	assert.NotContains(t, errOut, "KUBERNETES_MASTER")

	// Help, version and completion, through kubectl.
	out, _, code = kc("runnerguard", "--help")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "kubectl runnerguard [command]")
	out, _, code = kc("runnerguard", "version", "--help")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "kubectl runnerguard version [flags]", "help, not the version")
	version, _, code := kc("runnerguard", "version")
	assert.Equal(t, 0, code)
	assert.Contains(t, version, "runnerguard ")
	out, _, code = kc("runnerguard", "--version")
	assert.Equal(t, 0, code)
	assert.Equal(t, version, out)
	for shell, want := range map[string]string{
		"bash":       "__start_kubectl-runnerguard",
		"zsh":        "#compdef kubectl-runnerguard",
		"fish":       "complete -c kubectl-runnerguard",
		"powershell": "Register-ArgumentCompleter -CommandName 'kubectl-runnerguard'",
	} {
		out, errOut, code = kc("runnerguard", "completion", shell)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, want, shell)
	}
	_, _, code = kc("runnerguard", "completion", "tcsh")
	assert.Equal(t, 2, code)
	if bash, err := exec.LookPath("bash"); err == nil {
		script, _, _ := kc("runnerguard", "completion", "bash")
		cmd := exec.Command(bash, "-n")
		cmd.Stdin = strings.NewReader(script)
		out, err := cmd.CombinedOutput()
		assert.NoError(t, err, "the bash script parses: %s", out)
	}
	compNode := node(t, "e2e-complete-me")
	// `kubectl runnerguard <TAB>`: kubectl runs kubectl_complete-runnerguard.
	for _, tc := range []struct{ args, want []string }{
		{[]string{"runnerguard", ""}, []string{"why\t", "deaths\t", "version\t", "completion\t"}},
		{[]string{"runnerguard", "why", "-n", ns, ""}, []string{"alive\n", "plugged\n"}},
		{[]string{"runnerguard", "why", "-n", ""}, []string{ns + "\n"}},
		{[]string{"runnerguard", "deaths", "-o", ""}, []string{"wide\n", "custom-columns\n", "jsonpath\n"}},
		{[]string{"runnerguard", "drain", ""}, []string{compNode.Name + "\n"}},
	} {
		out, errOut, code = kc(append([]string{"__complete"}, tc.args...)...)
		require.Equal(t, 0, code, errOut)
		for _, w := range tc.want {
			assert.Contains(t, out, w, "kubectl __complete %q", tc.args)
		}
	}
}

// --as is kubectl's impersonation, done by the API server: the operator's
// kubeconfig asks, RBAC answers for the impersonated user.
func TestTheCLIReadsAsWhomAsNames(t *testing.T) {
	kc := plugin(t)
	ns := newNamespace(t, nil)
	pod := create(t, nil, busyRunner(ns, "seen"))
	setStatus(t, pod, podtest.Runner(ns, "seen").Terminated("runner", 1, "Error").Obj().Status)
	oneDeath(t, pod)

	_, errOut, code := kc("runnerguard", "why", "seen", "-n", ns, "--as", "dana@example.com")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `pods "seen" is forbidden: User "dana@example.com" cannot get resource "pods"`)
	_, errOut, code = kc("runnerguard", "deaths", "-n", ns, "--as", "dana@example.com")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `User "dana@example.com" cannot list resource "runnerdeaths"`)

	reader := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-death-reader"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"runnerdeaths"}, Verbs: []string{"get", "list"}},
	}}
	if err := admin.Create(context.Background(), reader); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	grant(t, ns, person("dana@example.com"), reader.Name, authorizationv1.ResourceAttributes{
		Verb: "list", Group: v1alpha1.GroupVersion.Group, Resource: "runnerdeaths"})

	out, errOut, code := kc("runnerguard", "why", "seen", "-n", ns, "--as", "dana@example.com")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `runner "runner" died: error-exit`)
	out, errOut, code = kc("runnerguard", "deaths", "-n", ns, "--as", "dana@example.com", "-o", "name")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "runnerdeath.runnerguard.io/")
	_, errOut, code = kc("runnerguard", "deaths", "-A", "--as", "dana@example.com")
	assert.Equal(t, 1, code, "the grant is the namespace's only")
	assert.Contains(t, errOut, `cannot list resource "runnerdeaths" in API group "runnerguard.io" at the cluster scope`)
}
