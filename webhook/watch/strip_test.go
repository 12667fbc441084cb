package watch

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/webhook/config"
	"github.com/runnerguard/runnerguard/webhook/death"
	"github.com/runnerguard/runnerguard/webhook/podtest"
	"github.com/runnerguard/runnerguard/webhook/runnerpod"
)

func TestStripPodKeepsWhatTheRecordReads(t *testing.T) {
	final := `{"v":1,"ts":"2026-11-01T12:10:00Z","cg":"v2","oom":1,"oom_kill":1}`
	w := podtest.ARCScaleSet("ci", "r").Node("n1").Terminated("runner", 137, "OOMKilled").SidecarTerminated(runnerpod.VitalsContainer, final).
		Annotate("kubectl.kubernetes.io/last-applied-configuration", "{...big...}").Annotate(runnerpod.CreatedBy, "me")
	pod := w.Obj()
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "SECRET_TOKEN", Value: "x"}}
	pod.Status.ContainerStatuses[0].State.Terminated.Message = "4 KiB of runner log lines"
	obj, err := StripPod(pod.DeepCopy())
	require.NoError(t, err)
	s := obj.(*corev1.Pod)

	assert.Nil(t, s.ManagedFields)
	assert.Equal(t, map[string]string{runnerpod.CreatedBy: "me"}, s.Annotations)
	assert.Empty(t, s.Spec.Containers[0].Env, "no specs beyond names")
	assert.Empty(t, s.Status.ContainerStatuses[0].State.Terminated.Message)
	cfg := config.Default()
	runner, ok := runnerpod.Match(s, cfg.Presets)
	require.True(t, ok, "still recognised")
	full, _ := runnerpod.Match(pod, cfg.Presets)
	assert.Equal(t, death.Deaths(pod, full), death.Deaths(s, runner), "the same record from the stripped pod")
}

func TestStripPodLeavesOtherObjectsAlone(t *testing.T) {
	ns := &corev1.Namespace{}
	got, err := StripPod(ns)
	require.NoError(t, err)
	assert.Same(t, ns, got)
}

func TestTheGuardsMetadataOfARunnerPodKeepsItsNameAndUIDOnly(t *testing.T) {
	pod := podtest.GitLab("ci", "r").Running("build").Obj()
	m := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: *pod.ObjectMeta.DeepCopy()}
	m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	m.ResourceVersion = "42"
	out, err := StripPod(m)
	require.NoError(t, err)
	assert.Equal(t, &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "r", UID: pod.UID, ResourceVersion: "42"}}, out)
}
