//go:build e2e

package api

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/e2e/internal/registration"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// checkInstall is a second installation, release "check", of the real
// binary as its own process, registered for one namespace of its own: a
// test can stop its process without touching the suite's webhooks.
type checkInstall struct {
	server *apitest.Server
	ns     string
	// cert is the Certificate its webhook configurations name.
	cert *unstructured.Unstructured
}

func installForCheck(t *testing.T) *checkInstall {
	t.Helper()
	ctx := context.Background()
	extra, err := server.Replica(ctx, "runnerguard-check.log")
	require.NoError(t, err)
	t.Cleanup(extra.Stop)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e-check-" + strings.ToLower(rand.String(6)),
		Labels: map[string]string{"e2e.runnerguard.io/check": "true"}}}
	require.NoError(t, admin.Create(ctx, ns))
	t.Cleanup(func() { _ = admin.Delete(ctx, ns) })

	o := extra.Options()
	o.Name = "check"
	o.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.runnerguard.io/check": "true"}}
	objs, err := registration.Render(suiteCfg, o)
	require.NoError(t, err)
	for _, obj := range []client.Object{objs.Validating, objs.Mutating} {
		require.NoError(t, admin.Create(ctx, obj))
		t.Cleanup(func() { _ = admin.Delete(ctx, obj) })
	}
	// What the chart puts beside them: its config, and the Certificate
	// that cert-manager would have made Ready.
	raw, err := yaml.Marshal(suiteCfg)
	require.NoError(t, err)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: objs.Validating.Name, Namespace: apitest.ReleaseNamespace},
		Data: map[string]string{"config.yaml": string(raw)}}
	require.NoError(t, admin.Create(ctx, cm))
	t.Cleanup(func() { _ = admin.Delete(ctx, cm) })
	certNS, certName, _ := strings.Cut(objs.Validating.Annotations["cert-manager.io/inject-ca-from"], "/")
	cert := &unstructured.Unstructured{}
	cert.SetAPIVersion("cert-manager.io/v1")
	cert.SetKind("Certificate")
	cert.SetNamespace(certNS)
	cert.SetName(certName)
	require.NoError(t, admin.Create(ctx, cert))
	t.Cleanup(func() { _ = admin.Delete(ctx, cert) })
	c := &checkInstall{server: extra, ns: ns.Name, cert: cert}
	c.setReady(t, "True", "Ready", "Certificate is up to date and has not expired")
	return c
}

// setReady writes the Certificate's Ready condition as cert-manager does.
func (c *checkInstall) setReady(t *testing.T, status, reason, message string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(c.cert), c.cert))
	require.NoError(t, unstructured.SetNestedSlice(c.cert.Object, []any{map[string]any{
		"type": "Ready", "status": status, "reason": reason, "message": message,
		"observedGeneration": c.cert.GetGeneration(), "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}}, "status", "conditions"))
	require.NoError(t, admin.Status().Update(ctx, c.cert))
}

// Through a real kubectl, as a plugin: green on a healthy installation,
// with what is on; one line when the certificate is not ready, and when
// the webhook's process is gone; --wait until it is back.
func TestCheckProvesBothWebhooksAnswerAndSaysWhatIsWrongInOneLine(t *testing.T) {
	kc := plugin(t)
	c := installForCheck(t)

	out, errOut, code := kc("runnerguard", "check")
	assert.Equal(t, 1, code, "two installations: it cannot tell which to ask: %s", out)
	assert.Contains(t, errOut, "runnerguard installations (releases ")
	assert.Contains(t, errOut, "name one with --release")

	// A team's own budget over runner pods (not runnerguard's), in a
	// namespace that enforces no Pod Security level: warned of, not failed.
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: "team-budget"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "ci"}}}}
	require.NoError(t, admin.Create(context.Background(), pdb))
	runner := podtest.Runner(c.ns, "team-runner").Label("team", "ci").Label(runnerpod.RunnerLabel, "true").Obj()
	runner.UID = ""
	require.NoError(t, admin.Create(context.Background(), runner))
	t.Cleanup(func() { forceRemove(runner) })

	out, errOut, code = kc("runnerguard", "check", "--release", "check")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	assert.Contains(t, out, "warning: namespaces "+c.ns+" allow privileged pods (no pod-security.kubernetes.io/enforce=baseline)")
	assert.Contains(t, out, "warning: PodDisruptionBudget "+c.ns+"/team-budget is not runnerguard's and selects runner pods")
	assert.Contains(t, out, "certificate  runnerguard/check-runnerguard-serving-cert: Ready\n")
	assert.Regexp(t, `guard\s+eviction.guard.runnerguard.io answered a dry-run eviction in `+c.ns+` in \d+ms, failure policy Fail\n`, out)
	assert.Regexp(t, `injector\s+inject.runnerguard.io answered a dry-run runner pod in `+c.ns+` in \d+ms, failure policy Ignore\n`, out)
	var on []string
	for _, p := range suiteCfg.Presets {
		if p.Enabled {
			on = append(on, string(p.Name))
		}
	}
	assert.Contains(t, out, "presets      "+strings.Join(on, ", ")+"\n")
	assert.Contains(t, out, "namespaces   "+c.ns+" ("+string(suiteCfg.Guard.Mode)+")\n")
	assert.Contains(t, out, "ok: the API server reaches the guard and the injector, and the certificate is ready\n")
	assert.Empty(t, errOut)
	// The same for a script, and the same exit status.
	out, errOut, code = kc("runnerguard", "check", "--release", "check", "-o", "json")
	require.Equal(t, 0, code, errOut)
	var said struct {
		OK       bool     `json:"ok"`
		Warnings []string `json:"warnings"`
		Facts    struct {
			Release     string `json:"release"`
			Certificate struct {
				Ready bool `json:"ready"`
			} `json:"certificate"`
			Guard []struct {
				Webhook string `json:"webhook"`
				Outcome string `json:"outcome"`
			} `json:"guard"`
		} `json:"facts"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &said), out)
	assert.True(t, said.OK)
	assert.Equal(t, "check-runnerguard", said.Facts.Release, "the installation's webhook configurations' name")
	assert.True(t, said.Facts.Certificate.Ready)
	require.NotEmpty(t, said.Facts.Guard)
	assert.Equal(t, "answered", said.Facts.Guard[0].Outcome)
	assert.NotEmpty(t, said.Warnings, "the warnings, as the text says them")
	pods := &corev1.PodList{}
	require.NoError(t, admin.List(context.Background(), pods, client.InNamespace(c.ns)))
	require.Len(t, pods.Items, 1, "the dry runs created nothing")
	assert.Equal(t, "team-runner", pods.Items[0].Name)

	c.setReady(t, "False", "IncorrectIssuer", "Issuer of the certificate is not up to date")
	_, errOut, code = kc("runnerguard", "check", "--release", "check")
	assert.Equal(t, 3, code, "asked, and something is wrong")
	assert.Equal(t, "error: certificate runnerguard/check-runnerguard-serving-cert is not ready: IncorrectIssuer: Issuer of the certificate is not up to date\n", errOut)
	c.setReady(t, "True", "Ready", "Certificate is up to date and has not expired")

	c.server.Stop()
	out, errOut, code = kc("runnerguard", "check", "--release", "check")
	assert.Equal(t, 3, code, out)
	assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %s", errOut)
	assert.Contains(t, errOut, "error: the guard did not answer a dry-run eviction in "+c.ns+" (eviction.guard.runnerguard.io, unreachable): ")
	assert.Contains(t, errOut, "connection refused")
	assert.Contains(t, out, "also: the injector did not answer a dry-run runner pod in "+c.ns+
		" (inject.runnerguard.io, no answer; failure policy Ignore let the request through without it)")

	// --wait asks again until the webhook is back.
	kubectl, env := pluginEnv(t)
	cmd := exec.Command(kubectl, "runnerguard", "check", "--release", "check", "--wait", "90s")
	cmd.Env = append(os.Environ(), env...)
	var waitOut, waitErr lockedBuffer
	cmd.Stdout, cmd.Stderr = &waitOut, &waitErr
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { return strings.Contains(waitErr.String(), "not yet:") }, patience, 100*time.Millisecond)
	require.NoError(t, c.server.Start(context.Background()))
	require.NoError(t, cmd.Wait(), "stdout:\n%s\nstderr:\n%s", waitOut.String(), waitErr.String())
	assert.Contains(t, waitErr.String(), "not yet: the guard did not answer a dry-run eviction in "+c.ns)
	assert.Contains(t, waitOut.String(), "ok: the API server reaches the guard and the injector")
}

// lockedBuffer is a buffer a command writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
