// Package jenkins is the Jenkins kubernetes plugin's agent pods as a fleet
// (github.com/jenkinsci/kubernetes-plugin, PodTemplateBuilder): an agent
// pod per node block or pod template of a build by default (idleMinutes 0:
// one use), the agent in the container "jnlp", which the Jenkins
// controller, with its own Kubernetes credential, deletes when the build
// is done with it. Jenkins is Java and was not run here: the pods are
// read from the plugin's source.
package jenkins

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Name is the preset's name.
const Name runnerpod.PresetName = "jenkins"

// The plugin's marks on an agent pod: the template's label and its digest
// on every pod (PodTemplate.java JENKINS_LABEL, JENKINS_LABEL_DIGEST), and
// the build's URLs on a pod a pipeline's podTemplate step made
// (PodTemplateStepExecution.java POD_ANNOTATION_BUILD_URL, _RUN_URL).
const (
	LabelLabel          = "jenkins/label"
	LabelDigestLabel    = "jenkins/label-digest"
	BuildURLAnnotation  = "buildUrl"
	RunURLAnnotation    = "runUrl"
	Agent               = "jnlp" // KubernetesCloud.java JNLP_NAME
	maxProtectedDefault = 168 * time.Hour
)

// Fleet is Jenkins' agent pods: a pod exists for its build, which the
// Jenkins controller ends (no idle signal).
type Fleet struct{ fleet.Quiet }

var _ fleet.Fleet = Fleet{}

// mark tells the fleet's pods from others.
const mark = fleet.OwnLabel(LabelDigestLabel)

// Name is the preset's name.
func (Fleet) Name() runnerpod.PresetName { return Name }

// Defaults: the agent's container, the build read from the plugin's
// marks, capped at 168h: Jenkins has no longest build of its own.
func (Fleet) Defaults() runnerpod.Preset {
	return runnerpod.Preset{RunnerContainers: []string{Agent}, MaxProtected: metav1.Duration{Duration: maxProtectedDefault},
		Job: runnerpod.JobKeys{
			URL: runnerpod.PodKey{Annotation: BuildURLAnnotation}, Name: runnerpod.PodKey{Annotation: RunURLAnnotation},
			Project: runnerpod.PodKey{Label: LabelLabel},
		}}
}

// Fits: the label digest, which the plugin sets on every agent pod.
func (Fleet) Fits(pod *corev1.Pod) bool { return mark.On(pod) }

// JobStart is the pod's start: by default it exists for one build.
func (Fleet) JobStart(pod *corev1.Pod) *metav1.Time { return fleet.PodStart(pod) }

// Sample gives the pod the label digest.
func (Fleet) Sample(pod *corev1.Pod) { mark.Put(pod, "0") }

// Traits: the Jenkins controller that created the pod ends its use, and
// often runs in the agents' namespace; the marks that name the build are
// the plugin's word, kept as created.
func (Fleet) Traits() fleet.Traits {
	return fleet.Traits{
		MarkLabels: []string{string(mark)},
		Owner:      fleet.Owner{EndsJob: true, InRunnerNamespace: true},
		Chart:      mark.Chart(),
	}
}
