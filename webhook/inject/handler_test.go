package inject

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
)

// handler returns a Handler whose namespaces are ci (no Pod Security
// label) and restricted (enforce: restricted).
func handler(t testing.TB) *Handler {
	t.Helper()
	ns := func(name string, labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	c := fake.NewClientBuilder().WithObjects(
		ns("ci", map[string]string{"runnerguard.io/enabled": "true"}),
		ns("restricted", map[string]string{"runnerguard.io/enabled": "true", psaEnforceLabel: "restricted"}),
	).Build()
	return NewHandler(configtest.Enforcing(), c)
}

// create is the review of a pod CREATE with raw as the object.
func create(namespace string, raw []byte) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       "review-1",
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: namespace, Operation: admissionv1.Create,
		UserInfo: authenticationv1.UserInfo{Username: goldenRequester},
		Object:   runtime.RawExtension{Raw: raw},
	}}
}

// rawInput is testdata/<name>.pod.yaml as JSON, as written (not through
// the Pod type).
func rawInput(t *testing.T, name string) []byte {
	t.Helper()
	y, err := os.ReadFile(filepath.Join("testdata", name+".pod.yaml"))
	require.NoError(t, err)
	raw, err := yaml.YAMLToJSON(y)
	require.NoError(t, err)
	return raw
}

// patched applies the response's patches to raw.
func patched(t *testing.T, raw []byte, resp admission.Response) []byte {
	t.Helper()
	if len(resp.Patches) == 0 {
		assert.Nil(t, resp.PatchType)
		return raw
	}
	ops, err := json.Marshal(resp.Patches)
	require.NoError(t, err)
	p, err := jsonpatch.DecodePatch(ops)
	require.NoError(t, err)
	out, err := p.Apply(raw)
	require.NoError(t, err)
	return out
}

// decodePod decodes raw as the handler does: case-sensitively, as the API
// server's JSON.
func decodePod(t *testing.T, raw []byte) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	require.NoError(t, unmarshalPod(raw, pod))
	return pod
}

// assertNoRemovals checks that the patch only adds: all it may remove is
// the record of the creation the pod came with (recordCreator, recordJobEnv).
func assertNoRemovals(t *testing.T, resp admission.Response) {
	t.Helper()
	for _, op := range resp.Patches {
		if op.Operation != "add" {
			assert.True(t, removable(op.Path), "patch %ss %s", op.Operation, op.Path)
		}
	}
}

func TestHandlerPatchesEveryGoldenInputIntoItsGolden(t *testing.T) {
	h := handler(t)
	for _, name := range goldenInputs(t) {
		t.Run(name, func(t *testing.T) {
			raw := rawInput(t, name)
			ns := decodePod(t, raw).Namespace
			resp := h.Handle(context.Background(), create(ns, raw))
			require.True(t, resp.Allowed)
			assertNoRemovals(t, resp)

			golden, err := os.ReadFile(filepath.Join("testdata", name+".golden.yaml"))
			require.NoError(t, err)
			var want Golden
			require.NoError(t, yaml.Unmarshal(golden, &want))
			assert.Equal(t, &want.Pod, decodePod(t, patched(t, raw, resp)))
			assert.Equal(t, want.Warnings, resp.Warnings)
		})
	}
}

func TestHandlerReturnsNoPatchForItsOwnResult(t *testing.T) {
	h := handler(t)
	raw := rawInput(t, "arc-scale-set")
	first := h.Handle(context.Background(), create("ci", raw))
	require.NotEmpty(t, first.Patches)
	again := patched(t, raw, first)

	before := testutil.ToFloat64(injections.WithLabelValues(string(Unchanged)))
	second := h.Handle(context.Background(), create("ci", again))
	assert.True(t, second.Allowed)
	assert.Empty(t, second.Patches)
	assert.Nil(t, second.PatchType)
	assert.Equal(t, before+1, testutil.ToFloat64(injections.WithLabelValues(string(Unchanged))))
}

func TestMetricsRegisterOnTheGivenRegistry(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, RegisterMetrics(reg))
	count(admission.Request{}, NotRunner)
	n, err := testutil.GatherAndCount(reg, "runnerguard_inject_total")
	require.NoError(t, err)
	assert.Positive(t, n)
	assert.Error(t, RegisterMetrics(reg), "a second registration is refused, not doubled")
}

func TestHandlerKeepsFieldsItsPodTypeDoesNotKnow(t *testing.T) {
	// ARC's dind (third init container once the sidecar is first) and the
	// pod spec carry fields from a newer API than this build knows.
	var pod map[string]any
	require.NoError(t, json.Unmarshal(rawInput(t, "arc-scale-set"), &pod))
	spec := pod["spec"].(map[string]any)
	spec["futureSpecField"] = "kept"
	dind := spec["initContainers"].([]any)[1].(map[string]any)
	require.Equal(t, "dind", dind["name"])
	dind["futureContainerField"] = map[string]any{"mode": "kept"}
	raw, err := json.Marshal(pod)
	require.NoError(t, err)

	resp := handler(t).Handle(context.Background(), create("ci", raw))
	require.True(t, resp.Allowed)

	var got map[string]any
	require.NoError(t, json.Unmarshal(patched(t, raw, resp), &got))
	gotSpec := got["spec"].(map[string]any)
	assert.Equal(t, "kept", gotSpec["futureSpecField"])
	inits := gotSpec["initContainers"].([]any)
	require.Len(t, inits, 3)
	for i, name := range []string{ContainerName, "init-dind-externals", "dind"} {
		c := inits[i].(map[string]any)
		assert.Equal(t, name, c["name"])
		if name == "dind" {
			assert.Equal(t, map[string]any{"mode": "kept"}, c["futureContainerField"])
		} else {
			assert.NotContains(t, c, "futureContainerField")
		}
	}
}

func TestHandlerPatchesOddPodsExactly(t *testing.T) {
	cases := []struct {
		name string
		edit func(spec map[string]any)
	}{{
		// The API server accepts repeated env names (the last wins).
		name: "env names that repeat",
		edit: func(spec map[string]any) {
			runner := spec["containers"].([]any)[0].(map[string]any)
			runner["env"] = []any{map[string]any{"name": "A", "value": "1"}, map[string]any{"name": "A", "value": "2"}}
		},
	}, {
		// A volume without its merge key, which defeated the strategic
		// merge the patch was once computed through.
		name: "a volume without a name",
		edit: func(spec map[string]any) {
			spec["volumes"] = []any{map[string]any{"emptyDir": map[string]any{}}}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var pod map[string]any
			require.NoError(t, json.Unmarshal(rawInput(t, "generic"), &pod))
			tc.edit(pod["spec"].(map[string]any))
			raw, err := json.Marshal(pod)
			require.NoError(t, err)

			resp := handler(t).Handle(context.Background(), create("ci", raw))
			require.True(t, resp.Allowed)

			want := decodePod(t, raw)
			Mutate(want, Facts{Requester: goldenRequester}, configtest.Enforcing())
			assert.Equal(t, want, decodePod(t, patched(t, raw, resp)))
		})
	}
}

func TestHandlerWithoutItsNamespaceLeavesTheSidecarOut(t *testing.T) {
	raw := rawInput(t, "generic")
	resp := handler(t).Handle(context.Background(), create("gone", raw))
	require.True(t, resp.Allowed)
	require.Len(t, resp.Warnings, 1)
	assert.Contains(t, resp.Warnings[0], `vitals sidecar not injected: its namespace "gone" could not be read`)
	got := decodePod(t, patched(t, raw, resp))
	assert.Len(t, got.Spec.InitContainers, 1, "only the pod's own poller")
	assert.Equal(t, corev1.TerminationMessageFallbackToLogsOnError, got.Spec.Containers[0].TerminationMessagePolicy)
}

// The cluster-wide Pod Security default applies to a namespace without an
// enforce label, and only to one.
func TestHandlerAppliesTheClusterPodSecurityDefault(t *testing.T) {
	h := handler(t)
	h.Config.Inject.PodSecurityDefault = config.PodSecurityBaseline
	raw := rawInput(t, "generic")

	resp := h.Handle(context.Background(), create("ci", raw))
	require.True(t, resp.Allowed)
	assert.Equal(t, []string{`runnerguard: vitals sidecar not injected: namespace "ci" has no pod-security.kubernetes.io/enforce label and the cluster's default Pod Security level is "baseline", which forbids the hostPath volume of the node's cgroup filesystem that the sidecar reads; to get the vitals, run the runners in a namespace labelled pod-security.kubernetes.io/enforce=privileged (the guard and the death records work without them)`}, resp.Warnings)
	assert.Len(t, decodePod(t, patched(t, raw, resp)).Spec.InitContainers, 1, "only the pod's own poller")

	h.Namespaces = fake.NewClientBuilder().WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: "ci", Labels: map[string]string{psaEnforceLabel: config.PodSecurityPrivileged},
	}}).Build()
	resp = h.Handle(context.Background(), create("ci", raw))
	assert.Empty(t, resp.Warnings, "the namespace's own label wins")
	assert.Equal(t, ContainerName, decodePod(t, patched(t, raw, resp)).Spec.InitContainers[0].Name)
}

func TestHandlerRequests(t *testing.T) {
	generic := func(t *testing.T) []byte { return rawInput(t, "generic") }
	cases := []struct {
		name    string
		req     func(t *testing.T) admission.Request
		allowed bool
		code    int32
		message string
	}{{
		name: "a delete is allowed untouched",
		req: func(t *testing.T) admission.Request {
			r := create("ci", nil)
			r.Operation, r.OldObject = admissionv1.Delete, runtime.RawExtension{Raw: generic(t)}
			return r
		},
		allowed: true, code: http.StatusOK,
	}, {
		name: "a create of a subresource is allowed untouched",
		req: func(t *testing.T) admission.Request {
			r := create("ci", []byte(`{"apiVersion":"policy/v1","kind":"Eviction"}`))
			r.SubResource = "eviction"
			return r
		},
		allowed: true, code: http.StatusOK,
	}, {
		name:    "a create without an object is a bad request",
		req:     func(*testing.T) admission.Request { return create("ci", nil) },
		code:    http.StatusBadRequest,
		message: "decoding the pod of the CREATE request",
	}, {
		name:    "a create with broken JSON is a bad request",
		req:     func(*testing.T) admission.Request { return create("ci", []byte(`{"kind":"Pod","spec":{`)) },
		code:    http.StatusBadRequest,
		message: "decoding the pod of the CREATE request",
	}, {
		name:    "a create whose object is not an object is a bad request",
		req:     func(*testing.T) admission.Request { return create("ci", []byte(`["runner"]`)) },
		code:    http.StatusBadRequest,
		message: "decoding the pod of the CREATE request",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := handler(t).Handle(context.Background(), tc.req(t))
			assert.Equal(t, tc.allowed, resp.Allowed)
			assert.Empty(t, resp.Patches)
			require.NotNil(t, resp.Result)
			assert.Equal(t, tc.code, resp.Result.Code)
			assert.Contains(t, resp.Result.Message, tc.message)
		})
	}
}

// BenchmarkHandle is the cost of one CREATE review of an ARC scale-set pod
// (decode, mutate and patch), without HTTP.
func BenchmarkHandle(b *testing.B) {
	h := handler(b)
	y, err := os.ReadFile(filepath.Join("testdata", "arc-scale-set.pod.yaml"))
	require.NoError(b, err)
	raw, err := yaml.YAMLToJSON(y)
	require.NoError(b, err)
	req := create("ci", raw)
	for b.Loop() {
		if resp := h.Handle(context.Background(), req); len(resp.Patches) == 0 {
			b.Fatal("no patch")
		}
	}
}

// A namespace made a moment before its pod (a CI system's per-job
// namespace) may not have reached the cache: the API server is asked.
func TestHandlerReadsANamespaceTheCacheHasNotSeenFromTheAPIServer(t *testing.T) {
	h := handler(t)
	h.Live = fake.NewClientBuilder().WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "new", Labels: map[string]string{"runnerguard.io/enabled": "true"}}}).Build()
	raw := rawInput(t, "generic")
	resp := h.Handle(context.Background(), create("new", raw))
	require.True(t, resp.Allowed)
	assert.Empty(t, resp.Warnings)
	got := decodePod(t, patched(t, raw, resp))
	assert.Equal(t, "runnerguard-vitals", got.Spec.InitContainers[0].Name, "the sidecar goes in")
}

func TestADryRunCreateGetsTheSameAnswerAndCountsNothing(t *testing.T) {
	h := handler(t)
	raw := rawInput(t, "arc-scale-set")
	injected := testutil.ToFloat64(injections.WithLabelValues(string(Injected)))
	req := create("ci", raw)
	req.DryRun = ptr.To(true)
	resp := h.Handle(context.Background(), req)
	require.True(t, resp.Allowed)
	assert.NotEmpty(t, resp.Patches, "the dry run is answered as the real create would be")
	assert.Equal(t, injected, testutil.ToFloat64(injections.WithLabelValues(string(Injected))), "a dry run counts nothing")
	h.Handle(context.Background(), create("ci", raw))
	assert.Equal(t, injected+1, testutil.ToFloat64(injections.WithLabelValues(string(Injected))), "the real create counts")
}

// evictionResponders is the raw pod's spec.evictionResponders, which this
// build's Pod type does not know.
func evictionResponders(t *testing.T, raw []byte) []any {
	t.Helper()
	var pod map[string]any
	require.NoError(t, json.Unmarshal(raw, &pod))
	rs, _ := pod["spec"].(map[string]any)["evictionResponders"].([]any)
	return rs
}

func TestHandlerNamesRunnerguardAnEvictionResponderOnlyWhereServed(t *testing.T) {
	raw := rawInput(t, "arc-scale-set")
	ours := map[string]any{"name": "runnerguard.io/guard", "priority": float64(9000)}

	off := handler(t)
	assert.Empty(t, evictionResponders(t, patched(t, raw, off.Handle(context.Background(), create("ci", raw)))),
		"a server without the API: the pod is as before")

	on := handler(t)
	on.EvictionResponder = true
	resp := on.Handle(context.Background(), create("ci", raw))
	require.True(t, resp.Allowed)
	got := patched(t, raw, resp)
	assert.Equal(t, []any{ours}, evictionResponders(t, got))

	// Reinvocation: named once.
	again := on.Handle(context.Background(), create("ci", got))
	assert.Empty(t, again.Patches)

	// The fleet's own controller keeps its place above runnerguard.
	var pod map[string]any
	require.NoError(t, json.Unmarshal(raw, &pod))
	fleet := map[string]any{"name": "actions.github.com/runner", "priority": float64(10000)}
	pod["spec"].(map[string]any)["evictionResponders"] = []any{fleet}
	withFleet, err := json.Marshal(pod)
	require.NoError(t, err)
	resp = on.Handle(context.Background(), create("ci", withFleet))
	assert.Equal(t, []any{fleet, ours}, evictionResponders(t, patched(t, withFleet, resp)))

	// Not a runner pod: not named.
	plain := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"ci"},"spec":{"containers":[{"name":"web","image":"nginx"}]}}`)
	assert.Empty(t, on.Handle(context.Background(), create("ci", plain)).Patches)
}
