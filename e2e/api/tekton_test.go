//go:build e2e

package api

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/fleet/tekton"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// tektonController is Tekton's controller as its release manifests run it
// (config/200-serviceaccount.yaml): the maker of every TaskRun's pod.
const tektonController = "system:serviceaccount:tekton-pipelines:tekton-pipelines-controller"

// A TaskRun's pod, played as the principals that would end it: Tekton's
// controller (a cancel or a timeout) ends the TaskRun it started; a reaper
// with edit, an editor wearing one of the namespace's ServiceAccounts and
// a drain wait while a step runs, and take the pod once its steps ended.
// The record names the TaskRun and its PipelineRun, and the step that
// ended the job.
func TestTektonsControllerAloneEndsARunningTaskRun(t *testing.T) {
	ns := newNamespace(t, nil)
	controller := may(t, ns, serviceAccount(tektonController), "edit")
	reaperSA := may(t, ns, serviceAccount(reaper), "edit")
	editor := may(t, ns, person("olga@example.com"), "edit")
	drainer := as(t, "system:serviceaccount:kube-system:cluster-autoscaler")
	underWay := podtest.Tekton(ns, "build-x7k2p").Terminated("step-build", 0, "Completed").RunningSince("step-test", time.Now().Add(-2*time.Minute))

	pod := create(t, controller.client(t), podtest.Tekton(ns, "build-x7k2p").Obj())
	assert.Equal(t, controller.user, pod.Annotations[runnerpod.CreatedBy], "the controller's pod, as the injector recorded it")
	assert.Equal(t, string(tekton.Name), pod.Annotations[runnerpod.PresetAnnotation])
	setStatus(t, pod, underWay.Obj().Status)

	err := deletePod(reaperSA.client(t), pod)
	assert.True(t, apierrors.IsForbidden(err), "a reaper waits for the TaskRun: %v", err)
	assert.Contains(t, err.Error(), `runner container "step-test"`, "the answer names the step under way")
	err = deletePod(as(t, "system:serviceaccount:"+ns+":default"), pod)
	assert.True(t, apierrors.IsForbidden(err), "no ServiceAccount of the namespace, which edit there may wear, is the controller: %v", err)
	err = deletePod(editor.client(t), pod)
	assert.True(t, apierrors.IsForbidden(err), "nor a person with edit: %v", err)
	assert.True(t, apierrors.IsTooManyRequests(evict(drainer, pod, false)), "a drain waits for the TaskRun")

	require.NoError(t, deletePod(controller.client(t), pod), "the controller cancels its TaskRun")
	st := underWay.Terminated("step-test", 143, "Error").Obj().Status
	for i := range st.ContainerStatuses {
		if c := &st.ContainerStatuses[i]; c.Name == "step-test" {
			c.State.Terminated.StartedAt.Time, c.State.Terminated.FinishedAt.Time = time.Now().Add(-2*time.Minute), time.Now()
		}
	}
	setStatus(t, pod, st)
	r := oneDeath(t, pod)
	assert.Equal(t, tekton.Name, runnerpod.PresetName(r.Preset))
	assert.Equal(t, "step-test", r.Container, "the step the cancel stopped, not the one that ended well")
	assert.Equal(t, controller.user, r.DeletedBy)
	assert.Equal(t, "job-owner", r.DeleteRule)
	assert.Equal(t, string(death.JobEnded), r.Class, "a cancel is the TaskRun's end, not a death")
	require.NotNil(t, r.Job)
	assert.Equal(t, "build-x7k2p", r.Job.Name)
	assert.Equal(t, "release-42", r.Job.Project, "the PipelineRun it ran for")
	assert.Equal(t, "uid-build-x7k2p", r.Job.ID)
	eventually(t, func() bool {
		list := &eventsv1.EventList{}
		require.NoError(t, admin.List(context.Background(), list, client.InNamespace(ns)))
		return slices.ContainsFunc(list.Items, func(e eventsv1.Event) bool {
			return e.Regarding.Kind == "TaskRun" && e.Regarding.Name == "build-x7k2p" && e.Reason == death.ReasonJobEnded &&
				e.Related != nil && e.Related.Name == pod.Name
		})
	}, "the TaskRun's end told on the TaskRun, where tkn shows it")

	// A TaskRun whose steps all ended keeps its pod until the TaskRun is
	// removed; anyone may take it then.
	done := create(t, controller.client(t), podtest.Tekton(ns, "lint-q9w3e").Terminated("step-build", 0, "Completed").Terminated("step-test", 0, "Completed").Phase(corev1.PodSucceeded).Obj())
	require.NoError(t, evict(drainer, done, false), "a drain takes a finished TaskRun's pod")
	assert.Equal(t, "step-test", oneDeath(t, done).Container, "one record for the TaskRun: its last step's")
}

// A step killed for memory is the TaskRun's death, told once, whatever the
// steps after it did.
func TestATaskRunsStepKilledForMemoryIsOneDeath(t *testing.T) {
	ns := newNamespace(t, nil)
	controller := may(t, ns, serviceAccount(tektonController), "edit")
	pod := create(t, controller.client(t), podtest.Tekton(ns, "test-m4n8b").
		Terminated("step-build", 137, "OOMKilled").Terminated("step-test", 1, "Error").Phase(corev1.PodFailed).Obj())
	r := oneDeath(t, pod)
	assert.Equal(t, string(death.CgroupOOM), r.Class)
	assert.Equal(t, "step-build", r.Container)
	assert.Equal(t, "test-m4n8b", r.Job.Name)
}

// tektonsTaskRun creates the TaskRun a pod of podtest.Tekton(ns, name)
// belongs to, running (Succeeded Unknown), and returns it with the pod's
// owner pointing at it.
func tektonsTaskRun(t *testing.T, ns, name string) (*unstructured.Unstructured, *podtest.Wrapper) {
	t.Helper()
	tr := &unstructured.Unstructured{}
	tr.SetAPIVersion("tekton.dev/v1")
	tr.SetKind("TaskRun")
	tr.SetNamespace(ns)
	tr.SetName(name)
	require.NoError(t, admin.Create(context.Background(), tr))
	w := podtest.Tekton(ns, name)
	w.OwnerReferences[0].UID = tr.GetUID()
	return tr, w
}

// setSucceeded writes the TaskRun's Succeeded condition, and the name of
// its pod, as Tekton's controller does once the TaskRun ended.
func setSucceeded(t *testing.T, tr *unstructured.Unstructured, status, reason, message string) {
	t.Helper()
	require.NoError(t, unstructured.SetNestedField(tr.Object, tr.GetName()+"-pod", "status", "podName"))
	require.NoError(t, unstructured.SetNestedSlice(tr.Object, []any{map[string]any{
		"type": "Succeeded", "status": status, "reason": reason, "message": message,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}}, "status", "conditions"))
	require.NoError(t, admin.Status().Update(context.Background(), tr))
}

// Tekton can tell a TaskRun whose pod was evicted as succeeded
// (tektoncd/pipeline#6145): the record keeps Tekton's own account beside
// its class, once Tekton gave it, and why shows both.
func TestTheRecordKeepsTektonsOwnAccountBesideItsClass(t *testing.T) {
	ns := newNamespace(t, nil)
	controller := may(t, ns, serviceAccount(tektonController), "edit")
	tr, w := tektonsTaskRun(t, ns, "deploy-v7c2d")
	pod := create(t, controller.client(t), w.Terminated("step-build", 0, "Completed").Terminated("step-test", 137, "Error").
		Reason("Evicted").Phase(corev1.PodFailed).Obj())
	r := oneDeath(t, pod)
	assert.Equal(t, string(death.NodeEviction), r.Class)
	assert.Nil(t, r.FleetView, "Tekton has not judged the TaskRun yet")

	setSucceeded(t, tr, "True", "Succeeded", "All Steps have completed executing")
	eventually(t, func() bool { return oneDeath(t, pod).FleetView != nil }, "Tekton's account kept on the record")
	v := oneDeath(t, pod).FleetView
	assert.Equal(t, "TaskRun/deploy-v7c2d", v.Object)
	assert.Equal(t, "Succeeded", v.Condition)
	assert.Equal(t, "True", v.Status)
	assert.Equal(t, "All Steps have completed executing", v.Message)
	out := runWhy(t, pod.Name, "-n", ns)
	assert.Contains(t, out, "node-eviction")
	assert.Contains(t, out, "the CI system's own account: TaskRun/deploy-v7c2d Succeeded=True (Succeeded)")
}
