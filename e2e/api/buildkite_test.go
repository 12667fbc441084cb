//go:build e2e

package api

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/fleet/buildkite"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// jobController is kube-controller-manager's job controller, which makes a
// Buildkite job's pod from the Kubernetes Job agent-stack-k8s creates.
const jobController = "system:serviceaccount:kube-system:job-controller"

// A Buildkite job's pod, played as the principals that would end it: a
// running job is ended by its agent, never by a delete, so a reaper, a
// drain and the job controller itself (which anyone who may edit the Job
// could set to delete it, by its deadline or a suspension) wait while the
// agent runs. Once the agent ended, the job is over: the job controller
// then kills what still runs, as the stack asks it to. The record is the
// job's one, naming its URL, pipeline and step.
func TestABuildkiteJobIsHeldWhileItsAgentRuns(t *testing.T) {
	ns := newNamespace(t, nil)
	reaperSA := may(t, ns, serviceAccount(reaper), "edit")
	drainer := as(t, "system:serviceaccount:kube-system:cluster-autoscaler")
	jobs := as(t, jobController)

	pod := create(t, jobs, podtest.Buildkite(ns, "0190a3c4").Obj())
	assert.Equal(t, jobController, pod.Annotations[runnerpod.CreatedBy])
	assert.Equal(t, string(buildkite.Name), pod.Annotations[runnerpod.PresetAnnotation])
	since := time.Now().Add(-2 * time.Minute)
	running := podtest.Buildkite(ns, "0190a3c4").Terminated("checkout", 0, "Completed").RunningSince("container-0", since).RunningSince("agent", since)
	setStatus(t, pod, running.Obj().Status)

	err := deletePod(reaperSA.client(t), pod)
	assert.True(t, apierrors.IsForbidden(err), "a reaper waits for the job: %v", err)
	assert.True(t, apierrors.IsForbidden(deletePod(jobs, pod)), "the job controller is no owner of a running job")
	assert.True(t, apierrors.IsTooManyRequests(evict(drainer, pod, false)), "a drain waits for the job")

	// The agent ended (its job done); a command container still runs.
	agentDone := running.Terminated("agent", 0, "Completed")
	setStatus(t, pod, agentDone.Obj().Status)
	require.NoError(t, deletePod(jobs, pod), "the job controller kills what outlived the agent")
	setStatus(t, pod, finishedNow(agentDone, "container-0", 137))
	r := oneDeath(t, pod)
	assert.Equal(t, buildkite.Name, runnerpod.PresetName(r.Preset))
	assert.Equal(t, "job-over", r.DeleteRule)
	assert.Equal(t, string(death.JobEnded), r.Class, "the job was over: the kill of what outlived it is no death")
	assert.Equal(t, "container-0", r.Container)
	require.NotNil(t, r.Job)
	assert.Equal(t, "0190a3c4", r.Job.ID)
	assert.Equal(t, "https://buildkite.com/acme/app/builds/42#0190a3c4", r.Job.URL)
	assert.Equal(t, "app", r.Job.Project)
	assert.Equal(t, "test", r.Job.Name, "the step's key")
}

// A command container killed for memory is the job's death, told once.
func TestABuildkiteCommandKilledForMemoryIsTheJobsDeath(t *testing.T) {
	ns := newNamespace(t, nil)
	pod := create(t, as(t, jobController), podtest.Buildkite(ns, "0190b7e2").Terminated("checkout", 0, "Completed").
		Terminated("container-0", 137, "OOMKilled").Terminated("agent", 1, "Error").Obj())
	r := oneDeath(t, pod)
	assert.Equal(t, string(death.CgroupOOM), r.Class)
	assert.Equal(t, "container-0", r.Container)
}
