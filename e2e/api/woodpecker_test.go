//go:build e2e

package api

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/fleet/woodpecker"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// finishedNow is w with container ended by exit now, having run two
// minutes: a container the pod's deletion stopped.
func finishedNow(w *podtest.Wrapper, container string, exit int32) corev1.PodStatus {
	st := w.Terminated(container, exit, "Error").Obj().Status
	for i := range st.ContainerStatuses {
		if c := &st.ContainerStatuses[i]; c.Name == container {
			c.State.Terminated.StartedAt.Time, c.State.Terminated.FinishedAt.Time = time.Now().Add(-2*time.Minute), time.Now()
		}
	}
	return st
}

// A Woodpecker step's pod, played as the principals that would end it:
// the agent, in the steps' namespace as the backend has it by default and
// acting with its own pod's token, ends the step it created (a cancel, the
// pipeline's timeout); a reaper with edit, the same reaper wearing the
// agent's ServiceAccount and a drain wait while the step runs. The record
// names the step, the workflow and the repository.
func TestWoodpeckersAgentAloneEndsARunningStep(t *testing.T) {
	ns := newNamespace(t, nil)
	const agentSA = "woodpecker-agent"
	agentUser := serviceAccountIn(t, ns, agentSA)
	may(t, ns, serviceAccount(agentUser), "edit")
	agent := token(t, cs, ns, agentSA, runnerPod(t, ns, "woodpecker-agent-0", agentSA))
	reaperUser := serviceAccountIn(t, ns, "orphan-reaper")
	may(t, ns, serviceAccount(reaperUser), "edit")
	reaperID := token(t, cs, ns, "orphan-reaper", nil)
	drainer := as(t, "system:serviceaccount:kube-system:cluster-autoscaler")

	w := podtest.Woodpecker(ns, "test")
	pod := create(t, agent.client(t), w.Obj())
	assert.Equal(t, agentUser, pod.Annotations[runnerpod.CreatedBy])
	assert.Equal(t, string(woodpecker.Name), pod.Annotations[runnerpod.PresetAnnotation])
	running := podtest.Woodpecker(ns, "test").RunningSince(pod.Name, time.Now().Add(-2*time.Minute))
	setStatus(t, pod, running.Obj().Status)

	err := deletePod(reaperID.client(t), pod)
	assert.True(t, apierrors.IsForbidden(err), "a reaper waits for the step: %v", err)
	err = deletePod(reaperID.wearing(agentUser).client(t), pod)
	assert.True(t, apierrors.IsForbidden(err), "the agent's name, worn, is not the agent: %v", err)
	assert.Contains(t, err.Error(), "which anyone granted edit in "+ns+" can impersonate")
	assert.True(t, apierrors.IsTooManyRequests(evict(drainer, pod, false)), "a drain waits for the step")

	require.NoError(t, deletePod(agent.client(t), pod), "the agent, with its own pod's token, ends its step")
	setStatus(t, pod, finishedNow(running, pod.Name, 143))
	r := oneDeath(t, pod)
	assert.Equal(t, woodpecker.Name, runnerpod.PresetName(r.Preset))
	assert.Equal(t, agentUser, r.DeletedBy)
	assert.Equal(t, "job-owner", r.DeleteRule)
	assert.Equal(t, string(death.JobEnded), r.Class)
	require.NotNil(t, r.Job)
	assert.Equal(t, "test", r.Job.Name, "the step")
	assert.Equal(t, "1342", r.Job.ID, "the workflow")
	assert.Equal(t, "acme/app", r.Job.Project, "the repository, as the step's CI_REPO names it")
}
