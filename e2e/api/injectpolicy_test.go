//go:build e2e

package api

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/responder"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
	"github.com/runnerguard/runnerguard/webhook/inject"
)

// injectBy is the annotation by which the injection policy says who
// instrumented a pod: "policy", or "webhook" for a pod it hands over.
const injectBy = "runnerguard.io/inject-by"

// injectPolicyLabel marks the namespaces the injection policy serves here:
// the suite's own opted-in namespaces stay the webhook's, so one API server
// runs both paths side by side.
const injectPolicyLabel = "e2e.runnerguard.io/inject"

var registerInjectPolicy = sync.OnceValue(func() error {
	ctx := context.Background()
	if err := server.RegisterInjectPolicy(ctx, admin, suiteCfg, map[string]string{injectPolicyLabel: "policy"}); err != nil {
		return err
	}
	// The API server takes up a new policy a moment after it is stored: a
	// dry run in a namespace it serves says when.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "inject-policy-probe", Labels: map[string]string{injectPolicyLabel: "policy"}}}
	if err := admin.Create(ctx, ns); err != nil {
		return err
	}
	probe := podtest.Runner(ns.Name, "probe").Obj()
	probe.UID = ""
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p := probe.DeepCopy()
		if err := admin.Create(ctx, p, client.DryRunAll); err != nil {
			return false, err
		}
		return p.Annotations[injectBy] == "policy", nil
	})
})

// policyNamespace makes a namespace where runner pods are instrumented by
// the injection policy, and by the injector's webhook only for the pods
// the policy hands it, as the chart registers them on 1.36 and later.
func policyNamespace(t *testing.T, labels map[string]string) string {
	t.Helper()
	if !creatorPolicyServed() {
		t.Skip("the API server serves no MutatingAdmissionPolicy (before 1.36)")
	}
	if responder.ServedBy(cs.Discovery()) {
		t.Skip("the API server serves eviction requests: the chart keeps the injection in the webhook, which names runnerguard among a pod's responders")
	}
	require.NoError(t, registerInjectPolicy())
	all := map[string]string{injectPolicyLabel: "policy"}
	for k, v := range labels {
		all[k] = v
	}
	return plainNamespace(t, all)
}

// The injection policy and the injector make the same pod of every one of
// the injector's golden inputs, through the real API server: the policy
// instruments those it can, and hands the rest to the webhook, which is
// then called for them alone.
func TestTheInjectionPolicyMakesThePodsTheInjectorMakes(t *testing.T) {
	restricted := map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}
	byPolicy := map[string]string{"ci": policyNamespace(t, nil), "restricted": policyNamespace(t, restricted)}
	byWebhook := map[string]string{"ci": newNamespace(t, nil), "restricted": newNamespace(t, restricted)}
	// Who instruments each input on the policy's path ("" for no one).
	want := map[string]string{
		"already-injected": "webhook", "author-vitals-container": "webhook", "bad-opt-out": "webhook",
		"pod-level-full": "webhook", "pod-level-resources": "webhook", "long-job-variable": "webhook",
		"mirror": "", "not-runner": "",
	}
	inputs, err := filepath.Glob(filepath.Join(injectTestdata, "*.pod.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, inputs)
	// The injector's reviews of pods in ns, by both replicas' logs: the
	// log line is written before the answer.
	calls := func(ns string) int {
		n := 0
		for _, s := range []*apitest.Server{server, replica} {
			lines, err := s.LogLines("pod create")
			require.NoError(t, err)
			for _, l := range lines {
				if l["namespace"] == ns {
					n++
				}
			}
		}
		return n
	}
	for _, file := range inputs {
		name := strings.TrimSuffix(filepath.Base(file), ".pod.yaml")
		t.Run(name, func(t *testing.T) {
			in, _ := readGolden(t, name)
			if in.Spec.Resources != nil {
				apitest.RequireServer(t, cs.Discovery(), apitest.PodLevelResources)
			}
			c, _ := warningsAs(t, goldenRequester)
			webhook, err := asStored(t, c, byWebhook[in.Namespace], in)
			require.NoError(t, err)
			before := calls(byPolicy[in.Namespace])
			policy, err := asStored(t, c, byPolicy[in.Namespace], in)
			require.NoError(t, err)
			by, ok := want[name]
			if !ok {
				by = "policy"
			}
			assert.Equal(t, by, policy.Annotations[injectBy], "who instrumented it")
			called := 0
			if by == "webhook" {
				called = 1
			}
			assert.Equal(t, called, calls(byPolicy[in.Namespace])-before, "the webhook's reviews")
			delete(policy.Annotations, injectBy)
			assert.Equal(t, injected(webhook), injected(policy))
		})
	}
}

// With every runnerguard pod gone, a runner pod created where the policy
// instruments is instrumented all the same, and names its creator.
func TestWithRunnerguardDownThePolicyStillInstrumentsRunnerPods(t *testing.T) {
	ns := policyNamespace(t, nil)
	ctx := context.Background()
	restart := stopRunnerguard(t)

	in, _ := readGolden(t, "gitlab")
	in.Namespace = ns
	c, _ := warningsAs(t, goldenRequester)
	require.NoError(t, c.Create(ctx, in))
	t.Cleanup(func() { forceRemove(in) })
	got := &corev1.Pod{}
	require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(in), got))
	assert.Equal(t, "policy", got.Annotations[injectBy])
	assert.Equal(t, goldenRequester, got.Annotations[runnerpod.CreatedBy], "the creator is recorded")
	assert.Equal(t, "gitlab", got.Annotations[runnerpod.PresetAnnotation])
	assert.Equal(t, "true", got.Labels[runnerpod.RunnerLabel])
	require.NotEmpty(t, got.Spec.InitContainers)
	assert.Equal(t, inject.ContainerName, got.Spec.InitContainers[0].Name, "the vitals sidecar is there")
	assert.Contains(t, got.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: inject.VitalsVolume, MountPath: suiteCfg.Inject.Vitals.MountPath, ReadOnly: true})
	restart()
}
