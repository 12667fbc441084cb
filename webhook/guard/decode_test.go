package guard

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/webhook/inject"
)

// decodedBothWays is pod's JSON decoded whole and as the guard decodes it
// from a review.
func decodedBothWays(t testing.TB, pod *corev1.Pod) (whole, reviewed *corev1.Pod) {
	t.Helper()
	raw, err := json.Marshal(pod)
	require.NoError(t, err)
	whole = &corev1.Pod{}
	require.NoError(t, json.Unmarshal(raw, whole))
	reviewed, err = decodePod(raw)
	require.NoError(t, err)
	require.Equal(t, reviewed, slim(whole), "a pod the guard reads itself is slimmed as a review's is decoded")
	return whole, reviewed
}

// unreadDropped is pod without what decodePod skips.
func unreadDropped(pod *corev1.Pod) *corev1.Pod {
	want := pod.DeepCopy()
	want.APIVersion, want.Kind = "v1", "Pod"
	want.ManagedFields = nil
	want.Spec.Volumes, want.Spec.EphemeralContainers = nil, nil
	names := func(cs []corev1.Container) []corev1.Container {
		if cs == nil {
			return nil
		}
		out := make([]corev1.Container, len(cs))
		for i, c := range cs {
			out[i] = corev1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy}
		}
		return out
	}
	want.Spec.Containers, want.Spec.InitContainers = names(want.Spec.Containers), names(want.Spec.InitContainers)
	return want
}

// bulkyRunner is a runner pod as the API server sends it in a DELETE
// review: instrumented by the injector, bound, running, with managedFields,
// an ephemeral container and the env, volumes and probes that make up
// most of its bytes.
func bulkyRunner() *corev1.Pod {
	pod := podtest.Runner("ci", "bulky").Running("runner").Node("node-1").
		Annotate("note", "kept").Label("team", "kept").Obj()
	inject.Mutate(pod, inject.Facts{Requester: "system:serviceaccount:ci:pool"}, configtest.Enforcing())
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate,
		APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:phase":{}}}`)}}}
	pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: "BULK", Value: "x"})
	pod.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}}
	pod.Spec.ActiveDeadlineSeconds = ptr.To[int64](3600)
	return pod
}

func TestAReviewedPodKeepsAllButWhatTheGuardNeverReads(t *testing.T) {
	pod := bulkyRunner()
	require.NotEmpty(t, pod.Spec.Volumes, "the injector adds volumes")
	require.NotEmpty(t, pod.Spec.InitContainers, "the injector adds its sidecar")
	whole, got := decodedBothWays(t, pod)
	assert.Equal(t, unreadDropped(whole), got)
	assert.Equal(t, "kept", got.Labels["team"])
	assert.Equal(t, "runner", got.Spec.Containers[0].Name)
	assert.Equal(t, ptr.To(corev1.ContainerRestartPolicyAlways), got.Spec.InitContainers[0].RestartPolicy, "a native sidecar is known as one")
	assert.Empty(t, got.Spec.Containers[0].Env, "env is skipped over")
}

// A skipped field is checked to be JSON, not to be of its type: only a
// review the API server did not send could carry such a pod, and what is
// decided of it changes nothing the API server does.
func TestASkippedFieldIsNotTypeChecked(t *testing.T) {
	pod, err := decodePod([]byte(`{"metadata":{"name":"p"},"spec":{"volumes":5,"containers":[{"name":"runner","env":"x"}]}}`))
	require.NoError(t, err)
	assert.Equal(t, "runner", pod.Spec.Containers[0].Name)
}

// Whatever kind a review claims its object is, the guard's Events are
// about a pod.
func TestAReviewedPodIsAPodWhateverItsKindSays(t *testing.T) {
	pod, err := decodePod([]byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"p"}}`))
	require.NoError(t, err)
	assert.Equal(t, metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, pod.TypeMeta)
}

func TestABadReviewedPodIsAnError(t *testing.T) {
	for name, raw := range map[string]string{
		"not JSON":              `{"metadata":`,
		"a container unnamed":   `{"spec":{"containers":[{"name":7}]}}`,
		"labels not a map":      `{"metadata":{"labels":["a"]}}`,
		"skipped but malformed": `{"metadata":{"managedFields":[}}`,
	} {
		_, err := decodePod([]byte(raw))
		assert.Error(t, err, name)
	}
}

// Whatever the bytes, a pod the whole decoder takes is decoded as the
// whole pod without what the guard never reads.
func FuzzDecodePod(f *testing.F) {
	for _, pod := range []*corev1.Pod{bulkyRunner(), podtest.Plain("ci", "web").Running("app").Obj(),
		podtest.ARCScaleSet("ci", "arc").Running("runner").Obj(), podtest.Runner("ci", "t").Terminated("runner", 137, "OOMKilled").Obj()} {
		raw, err := json.Marshal(pod)
		require.NoError(f, err)
		f.Add(raw)
	}
	f.Add([]byte(`{"spec":{"containers":null,"volumes":{"x":1}}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var whole corev1.Pod
		if json.Unmarshal(raw, &whole) != nil {
			return
		}
		got, err := decodePod(raw)
		require.NoError(t, err)
		assert.Equal(t, unreadDropped(&whole), got)
	})
}
