//go:build e2e

package api

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/fleet/jenkins"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// A Jenkins agent pod, shaped as the kubernetes plugin's PodTemplateBuilder
// makes it (Jenkins is Java and does not run here), played as the
// principals that would end it: the Jenkins controller, running in the
// agents' namespace with its own pod's token, ends the agent it created
// when the build is done with it; a reaper with edit, wearing the
// controller's ServiceAccount or not, waits while the agent runs. The
// record names the build by its URL.
func TestTheJenkinsControllerAloneEndsARunningAgent(t *testing.T) {
	ns := newNamespace(t, nil)
	const jenkinsSA = "jenkins"
	jenkinsUser := serviceAccountIn(t, ns, jenkinsSA)
	may(t, ns, serviceAccount(jenkinsUser), "edit")
	controller := token(t, cs, ns, jenkinsSA, runnerPod(t, ns, "jenkins-0", jenkinsSA))
	reaperUser := serviceAccountIn(t, ns, "orphan-reaper")
	may(t, ns, serviceAccount(reaperUser), "edit")
	reaperID := token(t, cs, ns, "orphan-reaper", nil)

	pod := create(t, controller.client(t), podtest.Jenkins(ns, "app-42-x4k2p-q9w3e").Obj())
	assert.Equal(t, jenkinsUser, pod.Annotations[runnerpod.CreatedBy])
	assert.Equal(t, string(jenkins.Name), pod.Annotations[runnerpod.PresetAnnotation])
	running := podtest.Jenkins(ns, "app-42-x4k2p-q9w3e").RunningSince("jnlp", time.Now().Add(-2*time.Minute))
	setStatus(t, pod, running.Obj().Status)

	assert.True(t, apierrors.IsForbidden(deletePod(reaperID.client(t), pod)), "a reaper waits for the build")
	assert.True(t, apierrors.IsForbidden(deletePod(reaperID.wearing(jenkinsUser).client(t), pod)), "the controller's name, worn, is not the controller")

	require.NoError(t, deletePod(controller.client(t), pod), "the controller, with its own pod's token, ends its agent")
	setStatus(t, pod, finishedNow(running, "jnlp", 143))
	r := oneDeath(t, pod)
	assert.Equal(t, jenkinsUser, r.DeletedBy)
	assert.Equal(t, string(death.JobEnded), r.Class)
	require.NotNil(t, r.Job)
	assert.Equal(t, "https://jenkins.example.com/job/app/42/", r.Job.URL)
	assert.Equal(t, "job/app/42/", r.Job.Name)
}
