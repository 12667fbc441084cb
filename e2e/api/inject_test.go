//go:build e2e

package api

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/responder"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
	"github.com/runnerguard/runnerguard/webhook/inject"
)

// The injector's unit test data: the golden inputs and outputs, and the
// odd pods its fuzzer starts from.
const injectTestdata = "../../webhook/inject/testdata"

// goldenRequester creates every golden input, as in the unit tests.
const goldenRequester = "system:serviceaccount:ci:runner-manager"

// golden is webhook/inject's golden file.
type golden struct {
	Result   string     `json:"result"`
	Warnings []string   `json:"warnings,omitempty"`
	Pod      corev1.Pod `json:"pod"`
}

// plainNamespace makes a namespace the injector does not serve.
func plainNamespace(t *testing.T, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "plain-" + strings.ToLower(rand.String(6)), Labels: labels}}
	require.NoError(t, admin.Create(context.Background(), ns))
	t.Cleanup(func() { _ = admin.Delete(context.Background(), ns) })
	return ns.Name
}

// asStored is what the API server makes of pod in namespace ns, through a
// dry-run create: its defaults applied, nothing stored.
func asStored(t *testing.T, c client.Client, ns string, pod *corev1.Pod) (*corev1.Pod, error) {
	t.Helper()
	pod = pod.DeepCopy()
	pod.Namespace, pod.ResourceVersion, pod.UID = ns, "", ""
	err := c.Create(context.Background(), pod, client.DryRunAll)
	return pod, err
}

// injected is the part of a pod the injector writes or must keep: the
// metadata a client sets, and the spec.
// respondedOn is p, a pod stored without the injector, as the injector
// stores it on a server that serves eviction requests: an instrumented
// runner pod names runnerguard among its eviction responders (the
// injector's golden pods are Mutate's, which does not depend on the
// server).
func respondedOn(t *testing.T, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	if !responder.ServedBy(cs.Discovery()) || p.Annotations[runnerpod.PresetAnnotation] == "" {
		return p
	}
	for _, r := range p.Spec.EvictionResponders {
		if r.Name == responder.Name {
			return p
		}
	}
	p = p.DeepCopy()
	p.Spec.EvictionResponders = append(p.Spec.EvictionResponders, corev1.EvictionResponder{Name: responder.Name, Priority: ptr.To(responder.Priority)})
	return p
}

func injected(p *corev1.Pod) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Labels: p.Labels, Annotations: p.Annotations, OwnerReferences: p.OwnerReferences},
		Spec:       p.Spec,
	}
}

func readGolden(t *testing.T, name string) (*corev1.Pod, golden) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(injectTestdata, name+".pod.yaml"))
	require.NoError(t, err)
	in := &corev1.Pod{}
	require.NoError(t, yaml.UnmarshalStrict(raw, in))
	raw, err = os.ReadFile(filepath.Join(injectTestdata, name+".golden.yaml"))
	require.NoError(t, err)
	var g golden
	require.NoError(t, yaml.UnmarshalStrict(raw, &g))
	return in, g
}

func TestRunnerPodsAreCreatedAsTheGoldenFilesSay(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join(injectTestdata, "*.pod.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, inputs)
	// The golden inputs name their namespace: "restricted" enforces Pod
	// Security restricted, every other one is a plain opted-in namespace.
	restricted := map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}
	served := map[string]string{"ci": newNamespace(t, nil), "restricted": newNamespace(t, restricted)}
	unserved := map[string]string{"ci": plainNamespace(t, nil), "restricted": plainNamespace(t, restricted)}

	for _, file := range inputs {
		name := strings.TrimSuffix(filepath.Base(file), ".pod.yaml")
		t.Run(name, func(t *testing.T) {
			in, g := readGolden(t, name)
			if in.Spec.Resources != nil {
				// The golden pods are what a server that keeps them stores.
				apitest.RequireServer(t, cs.Discovery(), apitest.PodLevelResources)
			}
			c, warnings := warningsAs(t, goldenRequester)
			got, err := asStored(t, c, served[in.Namespace], in)
			require.NoError(t, err)
			// The golden pod, admitted where the injector is not called,
			// carries the same server defaults as the injected pod.
			want, err := asStored(t, admin, unserved[in.Namespace], &g.Pod)
			require.NoError(t, err)
			assert.Equal(t, injected(respondedOn(t, want)), injected(got))
			// Warnings name the namespace: the golden's, here a random one.
			var said []string
			for _, w := range *warnings {
				said = append(said, strings.ReplaceAll(w, `"`+served[in.Namespace]+`"`, `"`+in.Namespace+`"`))
			}
			assert.Equal(t, g.Warnings, said)
		})
	}
}

func TestAnInstrumentedPodCreatedAgainIsUnchanged(t *testing.T) {
	ns := newNamespace(t, nil)
	in, _ := readGolden(t, "arc-scale-set")
	c, _ := warningsAs(t, goldenRequester)
	in.Namespace = ns
	require.NoError(t, c.Create(context.Background(), in))
	t.Cleanup(func() { forceRemove(in) })
	require.Equal(t, inject.ContainerName, in.Spec.InitContainers[0].Name, "instrumented the first time")

	again := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: in.Name + "-again", Namespace: ns,
		Labels: in.Labels, Annotations: in.Annotations, OwnerReferences: in.OwnerReferences,
	}, Spec: in.Spec}
	require.NoError(t, c.Create(context.Background(), again))
	t.Cleanup(func() { forceRemove(again) })
	assert.Equal(t, injected(in), injected(again))

	lines, err := server.LogLines("pod create")
	require.NoError(t, err)
	var results []any
	for _, l := range lines {
		if l["name"] == again.Name && l["namespace"] == ns {
			results = append(results, l["result"])
		}
	}
	assert.Equal(t, []any{string(inject.Unchanged)}, results, "the second create got no patch")
}

func TestABaselineNamespaceGetsNoSidecarAndAWarning(t *testing.T) {
	ns := newNamespace(t, map[string]string{"pod-security.kubernetes.io/enforce": "baseline"})
	in, _ := readGolden(t, "generic")
	c, warnings := warningsAs(t, goldenRequester)
	got, err := asStored(t, c, ns, in)
	require.NoError(t, err, "admitted: the injector left out what baseline forbids")

	assert.Equal(t, []string{"poller"}, containerNames(got.Spec.InitContainers))
	assert.Empty(t, got.Spec.Volumes)
	assert.Empty(t, got.Spec.Containers[0].VolumeMounts)
	assert.Equal(t, corev1.TerminationMessageFallbackToLogsOnError, got.Spec.Containers[0].TerminationMessagePolicy, "the rest is injected")
	require.Len(t, *warnings, 1)
	assert.Contains(t, (*warnings)[0], `vitals sidecar not injected: namespace "`+ns+`" enforces Pod Security level "baseline"`)
	assert.Contains(t, (*warnings)[0], "to get the vitals, run the runners in a namespace labelled pod-security.kubernetes.io/enforce=privileged", "it says what to change")

	// The warning is also an Event where a person looks: on the pod's
	// controller, or on a bare pod by the name it was created with. The
	// dry run above left none.
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"}, Spec: appsv1.ReplicaSetSpec{
		Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pool"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "pool"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "runner", Image: "example.com/runner:1"}}}}}}
	require.NoError(t, admin.Create(context.Background(), rs))
	owned := in.DeepCopy()
	owned.Namespace, owned.Name = ns, "pool-owned"
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}
	require.NoError(t, c.Create(context.Background(), owned))
	bare := in.DeepCopy()
	bare.Namespace, bare.Name, bare.GenerateName = ns, "", "runner-abc-project-1-concurrent-0-"
	require.NoError(t, c.Create(context.Background(), bare))
	incomplete := func() map[string]eventsv1.Event {
		list := &eventsv1.EventList{}
		require.NoError(t, admin.List(context.Background(), list, client.InNamespace(ns)))
		out := map[string]eventsv1.Event{}
		for _, e := range list.Items {
			if e.Reason == inject.ReasonIncomplete {
				out[e.Regarding.Kind+"/"+e.Regarding.Name] = e
			}
		}
		return out
	}
	eventually(t, func() bool { return len(incomplete()) == 2 }, "an Event on the ReplicaSet and one on the bare pod")
	got2 := incomplete()
	onRS, onPod := got2["ReplicaSet/pool"], got2["Pod/runner-abc-project-1-concurrent-0-"]
	assert.Equal(t, rs.UID, onRS.Regarding.UID)
	assert.Equal(t, corev1.EventTypeWarning, onRS.Type)
	assert.Equal(t, "pod pool-owned: "+(*warnings)[0], onRS.Note)
	assert.Equal(t, "pod runner-abc-project-1-concurrent-0-: "+(*warnings)[0], onPod.Note)
	assert.NotContains(t, got2, "Pod/"+in.Name, "not for the dry run")
}

func TestRunnerPodsAreAdmittedUninstrumentedWhileTheInjectorIsDown(t *testing.T) {
	ns := newNamespace(t, nil)
	in, _ := readGolden(t, "generic")
	server.Stop()
	defer func() { require.NoError(t, server.Start(context.Background()), "restarting runnerguard") }()

	got, err := asStored(t, admin, ns, in)
	require.NoError(t, err, "failurePolicy Ignore admits the pod")
	assert.Equal(t, []string{"poller"}, containerNames(got.Spec.InitContainers))
	assert.NotContains(t, got.Annotations, "runnerguard.io/preset")
}

func TestOddPodsTheAPIServerAcceptsStayAcceptableOnceMutated(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(injectTestdata, "odd", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	served, unserved := newNamespace(t, nil), plainNamespace(t, nil)
	c, _ := warningsAs(t, goldenRequester)
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(file)
			require.NoError(t, err)
			in := &corev1.Pod{}
			require.NoError(t, runtime.DecodeInto(scheme.Codecs.UniversalDeserializer(), raw, in))
			in.Name = name
			if _, err := asStored(t, admin, unserved, in); err != nil {
				t.Skipf("the API server refuses the pod as it is: %v", err)
			}
			got, err := asStored(t, c, served, in)
			require.NoError(t, err, "refused once mutated")

			// And what it stored is what the injector's Mutate makes of it.
			want := in.DeepCopy()
			inject.Mutate(want, inject.Facts{Requester: goldenRequester, PodResourcesDropped: podResourcesDropped(t)}, suiteCfg)
			want, err = asStored(t, admin, unserved, want)
			require.NoError(t, err)
			assert.Equal(t, injected(respondedOn(t, want)), injected(got))
		})
	}
}

// podResourcesDropped is what the injector reads of the suite's API server
// at start: whether it drops a pod's spec.resources.
func podResourcesDropped(t *testing.T) bool {
	t.Helper()
	v, err := cs.Discovery().ServerVersion()
	require.NoError(t, err)
	dropped, err := inject.PodResourcesDropped(v)
	require.NoError(t, err)
	return dropped
}

func containerNames(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}
