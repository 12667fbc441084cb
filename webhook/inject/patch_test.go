package inject

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gomodules.xyz/jsonpatch/v2"
	jsonpatchv4 "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// wholePodPatch is the injector's patch as it was computed before it was
// built from the change: the diff from the raw pod to the mutated one,
// through a strategic merge when the raw pod holds what this build's Pod
// type does not know. It stays here as the reference the patch is held
// to. before and after are the decoded pod as this build encodes it,
// before and after Mutate.
func wholePodPatch(raw, before, after []byte, mutated *corev1.Pod) admission.Response {
	if bytes.Equal(raw, before) {
		return admission.PatchResponseFromRaw(raw, after)
	}
	if merged, err := mergeIntoRaw(raw, before, after); err == nil && decodesTo(merged, mutated) {
		return admission.PatchResponseFromRaw(raw, merged)
	}
	return dropSchemeRemovals(admission.PatchResponseFromRaw(raw, after), raw, before)
}

// plainDiffOfAnOddPod reports whether wholePodPatch fell back to the plain
// diff of this build's encoding: the raw pod is not that encoding and the
// strategic merge cannot reproduce the mutated pod on it (a volume without
// its merge key, or env names that repeat).
func plainDiffOfAnOddPod(raw, before, after []byte, mutated *corev1.Pod) bool {
	if bytes.Equal(raw, before) {
		return false
	}
	merged, err := mergeIntoRaw(raw, before, after)
	return err != nil || !decodesTo(merged, mutated)
}

func mergeIntoRaw(raw, before, after []byte) ([]byte, error) {
	change, err := strategicpatch.CreateTwoWayMergePatch(before, after, &corev1.Pod{})
	if err != nil {
		return nil, err
	}
	return strategicpatch.StrategicMergePatch(raw, change, &corev1.Pod{})
}

func decodesTo(data []byte, want *corev1.Pod) bool {
	var got corev1.Pod
	return json.Unmarshal(data, &got) == nil && reflect.DeepEqual(&got, want)
}

func dropSchemeRemovals(r admission.Response, raw, before []byte) admission.Response {
	isRemove := func(op jsonpatch.Operation) bool { return op.Operation == "remove" }
	if !r.Allowed || !slices.ContainsFunc(r.Patches, isRemove) {
		return r
	}
	scheme, err := jsonpatch.CreatePatch(raw, before)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("diffing the pod: %w", err))
	}
	r.Patches = slices.DeleteFunc(r.Patches, func(op jsonpatch.Operation) bool {
		return isRemove(op) && slices.ContainsFunc(scheme, func(s jsonpatch.Operation) bool { return isRemove(s) && s.Path == op.Path })
	})
	if len(r.Patches) == 0 {
		r.PatchType = nil
	}
	return r
}

// applyAsTheAPIServer applies the response's patch to raw as the API
// server's mutating admission does: the encoded patch, decoded and applied
// by the JSON patch library it uses.
func applyAsTheAPIServer(t *testing.T, raw []byte, resp admission.Response) []byte {
	t.Helper()
	require.True(t, resp.Allowed, "%v", resp.Result)
	if len(resp.Patches) == 0 {
		assert.Nil(t, resp.PatchType)
		return raw
	}
	encoded, err := json.Marshal(resp.Patches)
	require.NoError(t, err)
	p, err := jsonpatchv4.DecodePatch(encoded)
	require.NoError(t, err)
	out, err := p.Apply(raw)
	require.NoError(t, err, "applying %s", encoded)
	return out
}

// asAny is a JSON document as any value, numbers as written.
func asAny(t *testing.T, doc []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var v any
	require.NoError(t, d.Decode(&v))
	return v
}

// patchCase is one pod of the injector's case table, as the API server
// would send it.
type patchCase struct {
	name string
	raw  []byte
}

// patchCases is the injector's whole case table: every golden input, as
// written and as the API server encodes it; every odd pod; pods with
// fields this build does not know, in the pod and in a container; pods
// with repeated env names and a volume without a name; and each of them
// once more as the injector left it (a reinvocation, or a pod another
// webhook changed after it).
func patchCases(t *testing.T) []patchCase {
	t.Helper()
	var cases []patchCase
	for _, name := range goldenInputs(t) {
		raw := rawInput(t, name)
		cases = append(cases, patchCase{name + " as written", raw})
		encoded, err := json.Marshal(readPod(t, name))
		require.NoError(t, err)
		cases = append(cases, patchCase{name + " as encoded", encoded})
	}
	odd, err := filepath.Glob("testdata/odd/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, odd)
	for _, file := range odd {
		raw, err := os.ReadFile(file)
		require.NoError(t, err)
		cases = append(cases, patchCase{"odd " + strings.TrimSuffix(filepath.Base(file), ".json"), asSent(raw)})
	}
	edits := []struct {
		name, input string
		edit        func(pod map[string]any)
	}{
		{"unknown fields", "arc-scale-set", func(pod map[string]any) {
			spec := pod["spec"].(map[string]any)
			spec["futureSpecField"] = "kept"
			spec["initContainers"].([]any)[1].(map[string]any)["futureContainerField"] = map[string]any{"mode": "kept"}
			spec["containers"].([]any)[0].(map[string]any)["futureContainerField"] = "kept"
			pod["metadata"].(map[string]any)["futureMetadataField"] = []any{"kept"}
		}},
		{"env names that repeat", "generic", func(pod map[string]any) {
			runner := pod["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			runner["env"] = []any{map[string]any{"name": "A", "value": "1"}, map[string]any{"name": "A", "value": "2"}}
		}},
		{"a volume without a name", "generic", func(pod map[string]any) {
			pod["spec"].(map[string]any)["volumes"] = []any{map[string]any{"emptyDir": map[string]any{}}}
		}},
		{"annotation keys to escape", "gitlab", func(pod map[string]any) {
			meta := pod["metadata"].(map[string]any)
			meta["annotations"] = map[string]any{"a~b/c": "1", runnerpod.CreatedWith: "forged", runnerpod.CreatedBy: "forged"}
		}},
		{"empty maps and lists", "generic", func(pod map[string]any) {
			meta := pod["metadata"].(map[string]any)
			meta["labels"], meta["annotations"] = map[string]any{}, map[string]any{}
			spec := pod["spec"].(map[string]any)
			spec["initContainers"], spec["volumes"] = []any{}, []any{}
			runner := spec["containers"].([]any)[0].(map[string]any)
			runner["env"], runner["volumeMounts"] = []any{}, []any{}
		}},
	}
	for _, e := range edits {
		var pod map[string]any
		require.NoError(t, json.Unmarshal(rawInput(t, e.input), &pod))
		e.edit(pod)
		raw, err := json.Marshal(pod)
		require.NoError(t, err)
		cases = append(cases, patchCase{e.name, raw})
	}
	return cases
}

// patchVariant is what a case's pod is mutated with.
type patchVariant struct {
	name  string
	facts func(name string) Facts
	cfg   func(*config.Config)
}

var patchVariants = []patchVariant{
	{name: "as the golden tests", facts: factsFor},
	{name: "with a credential and a bound pod", facts: func(string) Facts {
		return Facts{Requester: goldenRequester, Credential: "JTI=1", BoundPod: "ci/creator"}
	}},
	{name: "by an anonymous requester", facts: func(string) Facts { return Facts{} }},
	{name: "the pod's resources dropped", facts: func(name string) Facts {
		f := factsFor(name)
		f.PodResourcesDropped = true
		return f
	}},
	{name: "the host mount refused", facts: func(string) Facts {
		return Facts{Requester: goldenRequester, HostMountRefused: "refused"}
	}},
	{name: "vitals off", facts: factsFor, cfg: func(c *config.Config) { c.Inject.Vitals.Enabled = false }},
	{name: "termination message policy kept", facts: factsFor, cfg: func(c *config.Config) { c.Inject.TerminationMessagePolicy = false }},
	{name: "OOM notify, no probe", facts: factsFor, cfg: func(c *config.Config) {
		c.Inject.Vitals.OOMNotify = true
		c.Inject.Vitals.ProbePort = 0
	}},
	{name: "annotations added", facts: factsFor, cfg: func(c *config.Config) {
		c.Inject.PodAnnotations = map[string]string{"example.com/b": "2", "example.com/a": "1", "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
	}},
}

// The patch built from the change and the whole pod's diff it replaced,
// each applied to the same raw pod as the API server applies a patch, give
// the same pod, as JSON (unknown fields included) and as the Pod type;
// over the injector's whole case table, each pod mutated once and then
// again as the first patch left it.
func TestThePatchFromTheChangeDoesWhatTheWholePodsDiffDid(t *testing.T) {
	for _, v := range patchVariants {
		cfg := configtest.Enforcing()
		if v.cfg != nil {
			v.cfg(&cfg)
		}
		for _, c := range patchCases(t) {
			t.Run(v.name+"/"+c.name, func(t *testing.T) {
				raw := c.raw
				for round := range 2 {
					facts := v.facts(strings.Fields(c.name)[0])
					pod := decodePod(t, raw)
					before, err := json.Marshal(pod)
					require.NoError(t, err)
					p := &patch{}
					out := mutate(pod, facts, cfg, p)
					after, err := json.Marshal(pod)
					require.NoError(t, err)
					assert.Equal(t, !bytes.Equal(before, after), p.changed(), "round %d: a patch exactly when the pod changes", round)

					mine := applyAsTheAPIServer(t, raw, p.response())
					reference := applyAsTheAPIServer(t, raw, wholePodPatch(raw, before, after, pod))
					assert.Equal(t, pod, decodePod(t, mine), "round %d: the patched pod is what Mutate made", round)
					assert.Equal(t, decodePod(t, reference), decodePod(t, mine), "round %d: the patched pods as the Pod type", round)
					// Where the reference fell back to diffing this build's
					// encoding of the pod, it wrote the encoding's empty
					// fields (resources: {}, name: "") into the parts it
					// rewrote: the same pod, not the same JSON. The patch
					// from the change leaves them as they came.
					if !plainDiffOfAnOddPod(raw, before, after, pod) {
						assert.Equal(t, asAny(t, reference), asAny(t, mine), "round %d: the patched pods as JSON", round)
					} else {
						t.Logf("round %d: the reference diffed the whole encoding", round)
					}
					if round == 1 {
						assert.False(t, p.changed(), "a second pass writes nothing: %v (%s)", p.ops, out.Result)
					}
					raw = mine
				}
			})
		}
	}
}

// The patch never rewrites what the raw pod had, except the annotations
// that record its creation: it adds, and removes only a created-with or a
// job variable's copy the pod came with.
func TestThePatchOnlyAddsToThePod(t *testing.T) {
	cfg := configtest.Enforcing()
	for _, c := range patchCases(t) {
		t.Run(c.name, func(t *testing.T) {
			p := &patch{}
			mutate(decodePod(t, c.raw), Facts{Requester: goldenRequester}, cfg, p)
			for _, op := range p.ops {
				switch op.Operation {
				case "add":
				case "remove":
					assert.True(t, removable(op.Path), "removes %s", op.Path)
				default:
					t.Errorf("operation %s %s", op.Operation, op.Path)
				}
			}
		})
	}
}

// removable reports whether path is an annotation the injector may remove
// from what the pod came with: its creation's record, which the pod may not
// forge.
func removable(path string) bool {
	return path == annotationsPath+"/"+pointerEscaper.Replace(runnerpod.CreatedWith) ||
		strings.HasPrefix(path, annotationsPath+"/"+pointerEscaper.Replace(runnerpod.EnvAnnotationPrefix))
}
