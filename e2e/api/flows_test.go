//go:build e2e

package api

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/e2e/internal/registration"
	"github.com/runnerguard/runnerguard/internal/fleet/arclegacy"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// The fleets' own flows, each played by the principal that plays it with
// only its RBAC, pass the policy and the guard together.

func TestAnOperatorWithTheOverrideDrainsABusyRunner(t *testing.T) {
	ns := newNamespace(t, nil)
	operator := may(t, ns, person("olga@example.com"), "edit")
	mayOverride(t, ns, operator)
	c := operator.client(t)
	pod := create(t, nil, busyRunner(ns, "drained"))

	err := evict(c, pod, false)
	assert.True(t, apierrors.IsTooManyRequests(err), "without the override the drain waits: %v", err)
	require.NoError(t, patchMeta(c, pod, annotations(runnerpod.AllowDelete, "node pool upgrade, OPS-7")))
	require.NoError(t, evict(c, pod, false), "with it the eviction goes through")
	assert.False(t, alive(t, pod))
}

func TestLegacyARCRemovesItsRunnerAfterUnregistration(t *testing.T) {
	ns := newNamespace(t, nil)
	reaperSA := may(t, ns, serviceAccount(reaper), "edit")
	legacy := may(t, ns, serviceAccount(arclegacy.Controller), "edit").client(t)
	pod := create(t, nil, running(podtest.ARCLegacy(ns, "legacy"), "runner"))

	err := deletePod(reaperSA.client(t), pod)
	assert.True(t, apierrors.IsForbidden(err), "a registered legacy runner is busy: %v", err)
	assert.Contains(t, err.Error(), registration.DeleteWebhook)
	require.NoError(t, patchMeta(legacy, pod, annotations(arclegacy.Unregistered, time.Now().UTC().Format(time.RFC3339))))
	require.NoError(t, deletePod(legacy, pod), "the controller removes its unregistered runner")
}

func TestARCRemovesAnIdleRunner(t *testing.T) {
	ns := newNamespace(t, nil)
	arc := may(t, ns, serviceAccount(arcController), "edit").client(t)
	er := apitest.EphemeralRunner(ns, "idle")
	require.NoError(t, admin.Create(context.Background(), er))
	pod := running(podtest.ARCScaleSet(ns, "idle"), "runner")
	pod.OwnerReferences[0].UID = er.GetUID()
	pod = create(t, nil, pod)
	require.NoError(t, deletePod(arc, pod), "an EphemeralRunner without a job is idle")
}

func TestGitLabsManagerEndsTheJobItCreated(t *testing.T) {
	ns := newNamespace(t, nil)
	reaperSA := may(t, ns, serviceAccount(reaper), "edit")
	// The manager in a namespace of its own: one in the build pods'
	// namespace is one edit there can wear (TestTheJobOwnerIsNoNameAnEditorCanWear).
	manager := may(t, ns, serviceAccount("system:serviceaccount:gitlab-runner:gitlab-runner"), "edit")
	pod := create(t, manager.client(t), podtest.GitLab(ns, "runner-x-project-1-concurrent-0").Obj())
	got := &corev1.Pod{}
	require.NoError(t, admin.Get(context.Background(), client.ObjectKeyFromObject(pod), got))
	assert.Equal(t, manager.user, got.Annotations[runnerpod.CreatedBy])
	setStatus(t, got, podtest.GitLab(ns, "x").RunningSince("build", time.Now()).Obj().Status)

	assert.True(t, apierrors.IsForbidden(deletePod(reaperSA.client(t), pod)), "a stranger may not end the job")
	require.NoError(t, deletePod(manager.client(t), pod), "its creator ends it")
}
