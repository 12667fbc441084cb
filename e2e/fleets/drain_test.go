//go:build fleets

package fleets

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rgdrain "github.com/runnerguard/runnerguard/internal/drain"
)

// drainLabel picks the one runner pod a case drains: the cluster has one
// node, which also runs runnerguard and the other cases' runners, so the
// drain is limited to that pod by --pod-selector (as e2e/node limits its
// drains to its runners).
const drainLabel = "e2e.runnerguard.io/drained"

// drainDeadline is how long the drain waits for the busy runner's job
// before it ends it.
const drainDeadline = "10s"

// runnerguardDrain drains the node of the running runner pod with
// `kubectl runnerguard drain NODE --deadline --reason`, as an operator
// ends the jobs left on a node at a deadline: the drain cordons the node,
// waits for the job until the deadline, then sets the override with the
// reason on the pod and evicts it. It uncordons the node as soon as the
// drain returns (and at the test's end), so the runners after it
// schedule, and returns the node's name.
func runnerguardDrain(t *testing.T, ns, pod, reason string) string {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{}
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: pod}, p))
	node := p.Spec.NodeName
	require.NotEmpty(t, node, "the runner pod's node")
	label := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, drainLabel, ns)
	require.NoError(t, admin.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(label))), "labelling the pod to drain")
	t.Cleanup(func() { uncordon(t, node) })
	args := []string{"drain", node, "--kubeconfig", kubeconfigPath, "--pod-selector", drainLabel + "=" + ns, "--ignore-daemonsets",
		"--deadline", drainDeadline, "--reason", reason, "--timeout", "3m"}
	var out bytes.Buffer
	cmd := exec.Command(runnerguardCLI, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start).Round(time.Millisecond)
	uncordon(t, node)
	code := 0
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	text := out.String()
	t.Logf("kubectl runnerguard %s (%s): exit %d\n%s", strings.Join(args, " "), took, code, text)
	require.NoError(t, os.WriteFile(artifact(t, "drain-"+ns+"-"+pod+".txt"), []byte(text), 0o644))
	require.Equal(t, rgdrain.ExitDrained, code, "drained: the job the deadline ended is said in the output")
	assert.Contains(t, text, "deadline reached: ending "+ns+"/"+pod)
	assert.Contains(t, text, "the deadline ended 1 job(s)")
	return node
}

// uncordon makes node schedulable again, as kubectl uncordon does.
func uncordon(t *testing.T, node string) {
	t.Helper()
	_, err := cs.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType,
		[]byte(`{"spec":{"unschedulable":false}}`), metav1.PatchOptions{})
	assert.NoError(t, err, "uncordoning node %s", node)
}

// drainReason is what a drained runner's record says of its end: the
// drain's --reason, the node and who drained it.
func drainReason(reason, node string) string {
	return reason + " (runnerguard drain of node " + node + " by "
}
