package inject

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/runnerguard/runnerguard/internal/config/configtest"
)

// problems lists what makes a pod spec invalid in ways the injector could
// cause: repeated container or volume names, mounts of missing volumes,
// repeated mount paths in a container.
func problems(pod *corev1.Pod) map[string]bool {
	out := map[string]bool{}
	volumes := map[string]int{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name]++
		if volumes[v.Name] == 2 {
			out["volume "+v.Name+" repeated"] = true
		}
	}
	names := map[string]int{}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			names[c.Name]++
			if names[c.Name] == 2 {
				out["container "+c.Name+" repeated"] = true
			}
			paths := map[string]bool{}
			for _, m := range c.VolumeMounts {
				if volumes[m.Name] == 0 {
					out[fmt.Sprintf("container %s mounts missing volume %s", c.Name, m.Name)] = true
				}
				if paths[m.MountPath] {
					out[fmt.Sprintf("container %s mounts %s twice", c.Name, m.MountPath)] = true
				}
				paths[m.MountPath] = true
			}
		}
	}
	return out
}

func FuzzMutate(f *testing.F) {
	// Seeds: the golden inputs, and testdata/odd/*.json, pod shapes with
	// nulls where lists are expected, names clashing with the sidecar's,
	// mounts at its path... The e2e suite sends the odd ones, mutated, to
	// a real API server.
	yamls, err := filepath.Glob("testdata/*.pod.yaml")
	require.NoError(f, err)
	odd, err := filepath.Glob("testdata/odd/*.json")
	require.NoError(f, err)
	require.NotEmpty(f, odd)
	for _, file := range append(yamls, odd...) {
		raw, err := os.ReadFile(file)
		require.NoError(f, err)
		raw, err = yaml.YAMLToJSON(raw) // JSON is YAML: the odd ones pass unchanged
		require.NoError(f, err)
		f.Add(raw)
	}
	cfg := configtest.Enforcing()
	h := handler(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		raw = asSent(raw)
		var pod corev1.Pod
		if err := unmarshalPod(raw, &pod); err != nil {
			resp := h.Handle(context.Background(), create("ci", raw))
			require.False(t, resp.Allowed)
			assert.Equal(t, int32(http.StatusBadRequest), resp.Result.Code)
			return
		}
		before := problems(&pod)
		facts := Facts{Requester: goldenRequester}
		once := pod.DeepCopy()
		first := Mutate(once, facts, cfg)
		for p := range problems(once) {
			assert.True(t, before[p], "Mutate introduced: %s", p)
		}
		twice := once.DeepCopy()
		assert.Equal(t, first, Mutate(twice, facts, cfg), "second outcome")
		assert.Equal(t, once, twice, "second pass changed the pod")

		// Through the handler: allowed, and its patch turns the raw pod
		// into what Mutate made of it.
		resp := h.Handle(context.Background(), create("ci", raw))
		require.True(t, resp.Allowed, "refused: %v", resp.Result)
		got := decodePod(t, patched(t, raw, resp))
		assert.Equal(t, once, got)
	})
}

// asSent returns raw, a pod, as the API server would send it in a review:
// its metadata, its spec and each of its containers an object. The API
// server encodes the pod from its Go type, where those are structs, so
// none is ever absent or null; the handler's patch writes into them
// (patch). Anything else is left as it came, nulls, unknown fields and
// all. raw that is not a JSON object is returned as it is.
func asSent(raw []byte) []byte {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var pod map[string]any
	if d.Decode(&pod) != nil || pod == nil || d.More() {
		return raw
	}
	object := func(m map[string]any, key string) map[string]any {
		o, ok := m[key].(map[string]any)
		if !ok {
			o = map[string]any{}
			m[key] = o
		}
		return o
	}
	object(pod, "metadata")
	spec := object(pod, "spec")
	for _, list := range []string{"initContainers", "containers"} {
		items, _ := spec[list].([]any)
		for i := range items {
			if _, ok := items[i].(map[string]any); !ok {
				items[i] = map[string]any{}
			}
		}
	}
	out, err := json.Marshal(pod)
	if err != nil {
		return raw
	}
	return out
}
