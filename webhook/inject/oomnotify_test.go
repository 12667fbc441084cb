package inject

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/podtest"
)

// failedChecks is the Pod Security checks of level the pod fails, by id.
func failedChecks(t *testing.T, pod *corev1.Pod, level api.Level) []string {
	t.Helper()
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	require.NoError(t, err)
	var failed []string
	for _, r := range eval.EvaluatePod(api.LevelVersion{Level: level, Version: api.LatestVersion()}, &pod.ObjectMeta, &pod.Spec) {
		if !r.Allowed {
			failed = append(failed, r.ForbiddenReason)
		}
	}
	return failed
}

func TestTheOOMNotifyOptIn(t *testing.T) {
	facts := Facts{Requester: "system:serviceaccount:ci:arc"}
	mutated := func(notify bool) (*corev1.Pod, corev1.Container) {
		cfg := configtest.Enforcing()
		cfg.Inject.Vitals.OOMNotify = notify
		pod := podtest.Runner("ci", "r").Obj()
		Mutate(pod, facts, cfg)
		return pod, sidecarOf(t, pod)
	}
	pod, def := mutated(false)
	notifyPod, notify := mutated(true)

	t.Run("off by default: the cgroup mount is read-only and the sidecar runs as non-root", func(t *testing.T) {
		assert.False(t, configtest.Enforcing().Inject.Vitals.OOMNotify)
		assert.True(t, def.VolumeMounts[0].ReadOnly)
		assert.Equal(t, ptr.To(true), def.SecurityContext.RunAsNonRoot)
	})
	t.Run("on, it adds a writable cgroup mount and root, and nothing else", func(t *testing.T) {
		want := def.DeepCopy()
		want.VolumeMounts[0].ReadOnly = false
		want.SecurityContext.RunAsNonRoot, want.SecurityContext.RunAsUser, want.SecurityContext.RunAsGroup = ptr.To(false), ptr.To(int64(0)), ptr.To(int64(0))
		assert.Equal(t, *want, notify)
		assert.Equal(t, []corev1.Capability{"ALL"}, notify.SecurityContext.Capabilities.Drop, "every capability stays dropped")
		assert.Empty(t, notify.SecurityContext.Capabilities.Add)
		assert.Nil(t, notify.SecurityContext.Privileged)
		assert.Equal(t, ptr.To(false), notify.SecurityContext.AllowPrivilegeEscalation)
	})
	t.Run("on or off, the pod needs Pod Security privileged for the hostPath alone; baseline refuses nothing more", func(t *testing.T) {
		assert.Empty(t, failedChecks(t, pod, api.LevelPrivileged))
		assert.Empty(t, failedChecks(t, notifyPod, api.LevelPrivileged))
		assert.Equal(t, []string{"hostPath volumes"}, failedChecks(t, pod, api.LevelBaseline))
		assert.Equal(t, failedChecks(t, pod, api.LevelBaseline), failedChecks(t, notifyPod, api.LevelBaseline))
		assert.Contains(t, failedChecks(t, notifyPod, api.LevelRestricted), "runAsNonRoot != true", "restricted refuses root besides")
	})
	t.Run("a second pass changes nothing more", func(t *testing.T) {
		cfg := configtest.Enforcing()
		cfg.Inject.Vitals.OOMNotify = true
		again := notifyPod.DeepCopy()
		Mutate(again, facts, cfg)
		assert.Equal(t, notifyPod, again)
	})
}
