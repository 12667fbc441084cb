package inject

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/podtest"
)

// The policy-engine exceptions the docs ship (docs/install/examples) grant
// what the injector adds, and no more: they are held here to its volume,
// its container and the default host path, and what they allow is held to
// an instrumented pod.
const examples = "../../docs/install/examples"

// readDocs parses every YAML document of an example file.
func readDocs(t *testing.T, name string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(examples, name))
	require.NoError(t, err)
	var docs []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, yaml.Unmarshal(doc, &m))
		if len(m) > 0 {
			docs = append(docs, &unstructured.Unstructured{Object: m})
		}
	}
}

// instrumented is a generic runner pod as the injector leaves it with
// every preset on.
func instrumented(t *testing.T) *corev1.Pod {
	t.Helper()
	pod := podtest.Runner("ci", "runner-1").Obj()
	out := Mutate(pod, Facts{Requester: "system:serviceaccount:ci:pool"}, configtest.Enforcing())
	require.Equal(t, Injected, out.Result, out.Warnings)
	return pod
}

func TestTheKyvernoExceptionGrantsTheInjectorsHostPathOnly(t *testing.T) {
	docs := readDocs(t, "kyverno-policyexception.yaml")
	require.Len(t, docs, 1)
	e := docs[0]
	assert.Equal(t, "kyverno.io/v2", e.GetAPIVersion())
	assert.Equal(t, "PolicyException", e.GetKind())
	assert.NotEmpty(t, e.GetNamespace(), "Kyverno reads exceptions from the namespaces it is told to")
	background, found, _ := unstructured.NestedBool(e.Object, "spec", "background")
	assert.True(t, found && !background, "the conditions read the request: no background scan")

	exceptions, _, _ := unstructured.NestedSlice(e.Object, "spec", "exceptions")
	require.Len(t, exceptions, 1)
	ex := exceptions[0].(map[string]any)
	assert.Equal(t, "disallow-host-path", ex["policyName"])
	assert.Contains(t, ex["ruleNames"], "host-path")

	matchAny, _, _ := unstructured.NestedSlice(e.Object, "spec", "match", "any")
	require.Len(t, matchAny, 1)
	kinds, _, _ := unstructured.NestedStringSlice(matchAny[0].(map[string]any), "resources", "kinds")
	assert.Equal(t, []string{"Pod"}, kinds)
	namespaces, _, _ := unstructured.NestedStringSlice(matchAny[0].(map[string]any), "resources", "namespaces")
	assert.NotEmpty(t, namespaces, "only the runner namespaces")

	conds, _, _ := unstructured.NestedSlice(e.Object, "spec", "conditions", "all")
	byKey := map[string]map[string]any{}
	for _, c := range conds {
		m := c.(map[string]any)
		byKey[m["key"].(string)] = m
	}
	pod := instrumented(t)
	var paths, names []any
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil {
			paths, names = append(paths, v.HostPath.Path), append(names, v.Name)
		}
	}
	assert.Equal(t, []any{config.Default().Inject.Vitals.CgroupHostPath}, paths, "the instrumented pod's one hostPath")
	assert.Equal(t, []any{CgroupVolume}, names)
	for key, want := range map[string]any{
		"{{ request.object.spec.volumes[?hostPath].hostPath.path }}": paths,
		"{{ request.object.spec.volumes[?hostPath].name }}":          names,
	} {
		require.Contains(t, byKey, key)
		assert.Equal(t, "AllIn", byKey[key]["operator"])
		assert.Equal(t, want, byKey[key]["value"], key)
	}
	// No container of the pod's own mounts the cgroup volume: only the
	// sidecar, an init container, read-only.
	mounts := "[?name == '" + CgroupVolume + "'][] | length(@) }}"
	for _, key := range []string{
		"{{ request.object.spec.containers[].volumeMounts" + mounts,
		"{{ request.object.spec.initContainers[?name != '" + ContainerName + "'].volumeMounts" + mounts,
	} {
		require.Contains(t, byKey, key)
		assert.Equal(t, "Equals", byKey[key]["operator"])
		assert.EqualValues(t, 0, byKey[key]["value"])
	}
	assert.Equal(t, []string{ContainerName}, mounting(pod, CgroupVolume, false), "the condition's premise")
}

// mounting names the containers of pod (init containers included) that
// mount volume, only those mounting it writable when writable is set.
func mounting(pod *corev1.Pod, volume string, writable bool) []string {
	var names []string
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, m := range c.VolumeMounts {
			if m.Name == volume && (!writable || !m.ReadOnly) {
				names = append(names, c.Name)
			}
		}
	}
	return names
}

func TestTheGatekeeperConstraintsAllowTheCgroupFilesystemReadOnlyInTheRunnerNamespacesOnly(t *testing.T) {
	docs := readDocs(t, "gatekeeper-host-filesystem.yaml")
	require.Len(t, docs, 2)
	for _, d := range docs {
		assert.Equal(t, "constraints.gatekeeper.sh/v1beta1", d.GetAPIVersion())
		assert.Equal(t, "K8sPSPHostFilesystem", d.GetKind())
	}
	cluster, runners := docs[0], docs[1]
	excluded, _, _ := unstructured.NestedStringSlice(cluster.Object, "spec", "match", "excludedNamespaces")
	included, _, _ := unstructured.NestedStringSlice(runners.Object, "spec", "match", "namespaces")
	assert.NotEmpty(t, included)
	assert.Equal(t, included, excluded, "the namespaces left out of one are those of the other")
	allowed, _, _ := unstructured.NestedSlice(runners.Object, "spec", "parameters", "allowedHostPaths")
	require.Len(t, allowed, 1)
	a := allowed[0].(map[string]any)
	assert.Equal(t, true, a["readOnly"])

	// gatekeeper-library's rule: every hostPath under an allowed prefix,
	// and with readOnly every mount of it read-only.
	pod := instrumented(t)
	for _, v := range pod.Spec.Volumes {
		if v.HostPath == nil {
			continue
		}
		prefix := a["pathPrefix"].(string)
		assert.True(t, v.HostPath.Path == prefix || strings.HasPrefix(v.HostPath.Path, strings.TrimSuffix(prefix, "/")+"/"),
			"%s under %s", v.HostPath.Path, prefix)
		assert.Empty(t, mounting(pod, v.Name, true), "no writable mount of %s", v.Name)
	}
}
