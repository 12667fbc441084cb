package recorder

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/fleet/arclegacy"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

func TestTheCacheKeepsWhatTheRecordReads(t *testing.T) {
	final := `{"v":1,"ts":"2026-11-01T12:10:00Z","cg":"v2","oom":1,"oom_kill":1}`
	w := podtest.ARCScaleSet("ci", "r").Node("n1").Terminated("runner", 137, "OOMKilled").SidecarTerminated(runnerpod.VitalsContainer, final).
		Annotate("kubectl.kubernetes.io/last-applied-configuration", "{...big...}").Annotate(runnerpod.CreatedBy, "me").
		Label("app.kubernetes.io/component", "runner")
	pod := w.Obj()
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "SECRET_TOKEN", Value: "x"}}
	pod.Status.ContainerStatuses[0].State.Terminated.Message = strings.Repeat("x", 5000) + "agent quit"
	pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{PeriodSeconds: 10}
	pod.Status.ContainerStatuses[0].Image = "ghcr.io/actions/actions-runner:2.330.0"
	s := stripped(t, pod)

	assert.Nil(t, s.ManagedFields)
	assert.Equal(t, map[string]string{runnerpod.CreatedBy: "me"}, s.Annotations, "only those the watcher reads: the creator, which a job-owner note must name")
	assert.Equal(t, map[string]string{arcscaleset.Label: "True"}, s.Labels, "only the labels a preset reads")
	assert.Empty(t, s.Spec.Containers[0].Env, "no specs beyond names")
	assert.Equal(t, []string{"dind"}, names(s.Spec.InitContainers), "of init containers only the sidecars, which never gate the runner")
	last := s.Status.ContainerStatuses[0].State.Terminated.Message
	assert.LessOrEqual(t, len(last), death.MaxMessageBytes+4, "the runner's last words, as much as a record keeps")
	assert.True(t, strings.HasSuffix(last, "agent quit"), "their end")
	assert.NotNil(t, s.Spec.Containers[0].LivenessProbe, "whether the runner has a liveness probe")
	assert.Empty(t, s.Status.ContainerStatuses[0].Image)
	cfg := configtest.Enforcing()
	runner, ok := presets.Match(s, cfg.Presets)
	require.True(t, ok, "still recognised")
	full, _ := presets.Match(pod, cfg.Presets)
	assert.Equal(t, full.Preset.Name, runner.Preset.Name)
	assert.Equal(t, death.Deaths(pod, full), death.Deaths(s, runner), "the same record from the cached pod")
}

func TestEveryPresetIsStillRecognisedInTheCache(t *testing.T) {
	cfg := configtest.Enforcing()
	for _, w := range []*podtest.Wrapper{
		podtest.ARCScaleSet("ci", "a"), podtest.ARCLegacy("ci", "b"), podtest.GitLab("ci", "c"),
		podtest.ARCWorkflow("ci", "d"), podtest.Runner("ci", "e"),
		podtest.ARCLegacy("ci", "f").Annotate(arclegacy.Unregistered, "2026-11-01T12:00:00Z"),
	} {
		pod := w.Label("team", "x").Obj()
		full, ok := presets.Match(pod, cfg.Presets)
		require.True(t, ok, pod.Name)
		got, ok := presets.Match(stripped(t, pod), cfg.Presets)
		require.True(t, ok, pod.Name)
		assert.Equal(t, full, got, pod.Name)
	}
}

func TestTheCachesTransformKeepsWhatItMadeAndCopiesDeeply(t *testing.T) {
	obj, err := compact(podtest.Runner("ci", "r").Terminated("runner", 1, "Error").Obj())
	require.NoError(t, err)
	again, err := compact(obj)
	require.NoError(t, err)
	assert.Same(t, obj, again, "a resync hands the transform what it made")
	c := obj.(*cachedPod)
	cp := c.DeepCopyObject().(*cachedPod)
	assert.Equal(t, c, cp)
	cp.statuses[0].State.Terminated.ExitCode = 2
	cp.containers[0] = "x"
	assert.Equal(t, int32(1), c.statuses[0].State.Terminated.ExitCode)
	assert.Equal(t, "runner", c.containers[0])
}

func names(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}
