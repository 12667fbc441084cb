// Package podtest builds runner pods of each fleet's shape for tests, in the
// wrapper style of kueue's testing builders. Never imported by production
// code.
package podtest

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Wrapper wraps a Pod under construction.
type Wrapper struct{ corev1.Pod }

// Start is the fixed time runner containers start at unless told otherwise.
var Start = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func container(name string) corev1.Container {
	return corev1.Container{Name: name, Image: "example.com/" + name + ":1", TerminationMessagePath: corev1.TerminationMessagePathDefault, TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent}
}

// Plain is a pod with one container "app": not a runner pod.
func Plain(ns, name string) *Wrapper {
	w := &Wrapper{corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{container("app")}, RestartPolicy: corev1.RestartPolicyNever},
	}}
	return w
}

// Runner is a generic pool's runner pod: one container "runner".
func Runner(ns, name string) *Wrapper {
	w := Plain(ns, name)
	w.Spec.Containers = []corev1.Container{container("runner")}
	return w
}

// ARCScaleSet is an ARC scale-set runner pod owned by EphemeralRunner er,
// with the dind native sidecar and init-dind-externals ARC 1.29+ adds.
func ARCScaleSet(ns, name string) *Wrapper {
	w := Runner(ns, name)
	w.Labels = map[string]string{"actions-ephemeral-runner": "True"}
	w.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "actions.github.com/v1alpha1", Kind: "EphemeralRunner", Name: name,
		UID: types.UID("er-" + name), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
	dind := container("dind")
	dind.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	w.Spec.InitContainers = []corev1.Container{container("init-dind-externals"), dind}
	return w
}

// ARCWorkflow is the "-workflow" job pod of ARC's kubernetes container mode.
func ARCWorkflow(ns, runnerPod string) *Wrapper {
	w := Plain(ns, runnerPod+"-workflow")
	w.Labels = map[string]string{"runner-pod": runnerPod}
	w.Spec.Containers = []corev1.Container{container("job")}
	return w
}

// ARCLegacy is a legacy (summerwind) ARC runner pod with its docker sidecar.
func ARCLegacy(ns, name string) *Wrapper {
	w := Plain(ns, name)
	w.Spec.Containers = []corev1.Container{container("runner"), container("docker")}
	w.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "actions.summerwind.dev/v1alpha1", Kind: "Runner", Name: name,
		UID: types.UID("runner-" + name), Controller: ptr.To(true),
	}}
	return w
}

// GitLab is a GitLab Runner executor build pod.
func GitLab(ns, name string) *Wrapper {
	w := Plain(ns, name)
	w.Spec.InitContainers = []corev1.Container{container("init-permissions")}
	w.Spec.Containers = []corev1.Container{container("build"), container("helper"), container("svc-0")}
	return w
}

// Obj returns the built pod.
func (w *Wrapper) Obj() *corev1.Pod { return &w.Pod }

// Annotate sets an annotation.
func (w *Wrapper) Annotate(k, v string) *Wrapper {
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[k] = v
	return w
}

// Label sets a label.
func (w *Wrapper) Label(k, v string) *Wrapper {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[k] = v
	return w
}

// Node places the pod on a node.
func (w *Wrapper) Node(n string) *Wrapper { w.Spec.NodeName = n; return w }

// Terminating sets a deletionTimestamp.
func (w *Wrapper) Terminating(at time.Time) *Wrapper {
	w.DeletionTimestamp = &metav1.Time{Time: at}
	return w
}

// ActiveDeadline gives the pod activeDeadlineSeconds and the start time
// the kubelet counts it from.
func (w *Wrapper) ActiveDeadline(seconds int64, started time.Time) *Wrapper {
	w.Spec.ActiveDeadlineSeconds = ptr.To(seconds)
	w.Status.StartTime = &metav1.Time{Time: started}
	return w
}

// Phase sets the pod phase.
func (w *Wrapper) Phase(p corev1.PodPhase) *Wrapper { w.Status.Phase = p; return w }

// Reason sets the pod's status reason (Evicted, NodeLost).
func (w *Wrapper) Reason(r string) *Wrapper { w.Status.Reason = r; return w }

// status returns the status entry of container name, adding it if absent.
func (w *Wrapper) status(name string) *corev1.ContainerStatus {
	for i := range w.Status.ContainerStatuses {
		if w.Status.ContainerStatuses[i].Name == name {
			return &w.Status.ContainerStatuses[i]
		}
	}
	w.Status.ContainerStatuses = append(w.Status.ContainerStatuses, corev1.ContainerStatus{Name: name, Image: "example.com/" + name + ":1", ContainerID: "containerd://" + name + "-1"})
	return &w.Status.ContainerStatuses[len(w.Status.ContainerStatuses)-1]
}

// Running marks container name running since Start, and the pod Running.
func (w *Wrapper) Running(name string) *Wrapper { return w.RunningSince(name, Start) }

// RunningSince marks container name running since t, and the pod Running.
func (w *Wrapper) RunningSince(name string, t time.Time) *Wrapper {
	w.Status.Phase = corev1.PodRunning
	s := w.status(name)
	s.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Time{Time: t}}}
	s.Ready, s.Started = true, ptr.To(true)
	return w
}

// Terminated marks container name terminated with exit code and reason,
// having run from Start for ten minutes.
func (w *Wrapper) Terminated(name string, exit int32, reason string) *Wrapper {
	s := w.status(name)
	s.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: exit, Reason: reason, ContainerID: s.ContainerID,
		StartedAt: metav1.Time{Time: Start}, FinishedAt: metav1.Time{Time: Start.Add(10 * time.Minute)},
	}}
	s.Ready, s.Started = false, ptr.To(false)
	return w
}

// Restarting marks container name waiting after a termination (CrashLoop).
func (w *Wrapper) Restarting(name string, exit int32, reason string) *Wrapper {
	w.Terminated(name, exit, reason)
	s := w.status(name)
	s.LastTerminationState, s.State = s.State, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	s.RestartCount++
	return w
}

// Waiting marks container name waiting (never ran) with reason.
func (w *Wrapper) Waiting(name, reason string) *Wrapper {
	w.status(name).State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
	return w
}

// SidecarTerminated adds a terminated init (sidecar) container name that
// left msg as its termination message.
func (w *Wrapper) SidecarTerminated(name, msg string) *Wrapper {
	w.Status.InitContainerStatuses = append(w.Status.InitContainerStatuses, corev1.ContainerStatus{
		Name: name, ContainerID: "containerd://" + name + "-1",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", Message: msg}},
	})
	return w
}

// SidecarRunning adds a running init (sidecar) container name.
func (w *Wrapper) SidecarRunning(name string) *Wrapper {
	w.Status.InitContainerStatuses = append(w.Status.InitContainerStatuses, corev1.ContainerStatus{
		Name: name, ContainerID: "containerd://" + name + "-1",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Time{Time: Start}}},
	})
	return w
}

// Deleted marks the pod's deletion asked for at t with grace seconds: its
// deletionTimestamp is t plus the grace period.
func (w *Wrapper) Deleted(at time.Time, grace int64) *Wrapper {
	w.DeletionTimestamp = &metav1.Time{Time: at.Add(time.Duration(grace) * time.Second)}
	w.DeletionGracePeriodSeconds = ptr.To(grace)
	return w
}

// Tekton is a TaskRun's pod as Tekton's controller makes it: its labels
// and owner, the init containers prepare and place-scripts, and the steps
// build and test (step-build, step-test).
func Tekton(ns, taskRun string) *Wrapper {
	w := Plain(ns, taskRun+"-pod")
	w.Labels = map[string]string{"tekton.dev/taskRun": taskRun, "tekton.dev/taskRunUID": "uid-" + taskRun,
		"tekton.dev/pipelineRun": "release-42", "tekton.dev/pipeline": "release", "app.kubernetes.io/managed-by": "tekton-pipelines"}
	w.OwnerReferences = []metav1.OwnerReference{{APIVersion: "tekton.dev/v1", Kind: "TaskRun", Name: taskRun,
		UID: types.UID("uid-" + taskRun), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	w.Spec.InitContainers = []corev1.Container{container("prepare"), container("place-scripts")}
	w.Spec.Containers = []corev1.Container{container("step-build"), container("step-test")}
	return w
}

// Woodpecker is a step's pod as Woodpecker's Kubernetes backend makes it:
// pod and container "wp-<ULID>", the step's, workflow's, repository's and
// forge's labels, and the step's CI_* environment.
func Woodpecker(ns, step string) *Wrapper {
	w := Plain(ns, "wp-01j9x2k7m3")
	w.Labels = map[string]string{"step": step, "woodpecker-ci.org/step": step, "woodpecker-ci.org/task-uuid": "1342",
		"woodpecker-ci.org/repo-full-name": "acme-app", "woodpecker-ci.org/repo-name": "app",
		"woodpecker-ci.org/forge-id": "github", "woodpecker-ci.org/repo-forge-id": WoodpeckerRepoID}
	c := container(w.Name)
	c.Env = []corev1.EnvVar{{Name: "CI_REPO", Value: "acme/app"}, {Name: "CI_COMMIT_SHA", Value: WoodpeckerCommit},
		{Name: "CI_FORGE_TYPE", Value: "github"}, {Name: "CI_FORGE_URL", Value: "https://github.com"},
		{Name: "CI_STEP_URL", Value: "https://ci.example.com/repos/7/pipeline/12/3"}}
	w.Spec.Containers = []corev1.Container{c}
	return w
}

// WoodpeckerCommit and WoodpeckerRepoID are Woodpecker's step's commit
// and its repository's id on its forge.
const (
	WoodpeckerCommit = "9fceb02d0ae598e95dc970b74767f19372d61af8"
	WoodpeckerRepoID = "700123"
)

// Buildkite is a job's pod as agent-stack-k8s has the job controller make
// it: the command container, the agent and the checkout, with the job's
// marks.
func Buildkite(ns, jobUUID string) *Wrapper {
	w := Plain(ns, "buildkite-"+jobUUID+"-x4k2p")
	w.Labels = map[string]string{"buildkite.com/job-uuid": jobUUID, "buildkite.com/controller-id": "agent-stack-k8s", "job-name": "buildkite-" + jobUUID}
	w.Annotations = map[string]string{"buildkite.com/job-url": "https://buildkite.com/acme/app/builds/42#" + jobUUID,
		"buildkite.com/pipeline-slug": "app", "buildkite.com/step-key": "test"}
	w.Spec.InitContainers = []corev1.Container{container("copy-agent"), container("imagecheck-0")}
	w.Spec.Containers = []corev1.Container{container("container-0"), container("agent"), container("checkout")}
	return w
}

// Jenkins is an agent pod as the kubernetes plugin makes it for a
// pipeline's podTemplate step: the agent "jnlp" beside a build container,
// the template's labels and the build's URLs.
func Jenkins(ns, name string) *Wrapper {
	w := Plain(ns, name)
	w.Labels = map[string]string{"jenkins": "slave", "jenkins/label": "app_42-x4k2p", "jenkins/label-digest": "3f786850e387550fdab836ed7e6dc881de23001b"}
	w.Annotations = map[string]string{"buildUrl": "https://jenkins.example.com/job/app/42/", "runUrl": "job/app/42/"}
	w.Spec.Containers = []corev1.Container{container("maven"), container("jnlp")}
	return w
}
