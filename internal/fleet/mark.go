package fleet

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodStart is the job's start for a fleet whose pod exists for one job
// (JobStart): the pod's own start.
func PodStart(pod *corev1.Pod) *metav1.Time {
	if st := pod.Status.StartTime; st != nil && !st.IsZero() {
		return st.DeepCopy()
	}
	return nil
}

// OwnLabel is the label a fleet's software puts on each of its pods and on no
// other, which tells them apart (Fits).
type OwnLabel string

// On reports whether the pod carries the label.
func (l OwnLabel) On(pod *corev1.Pod) bool {
	_, ok := pod.Labels[string(l)]
	return ok
}

// Put gives the pod the label, with value (Sample).
func (l OwnLabel) Put(pod *corev1.Pod, value string) {
	pod.Labels = map[string]string{string(l): value}
}

// Chart is what the chart states of a fleet told by the label alone: On in
// CEL, its presence deciding the preset, and the job's marks kept as
// created.
func (l OwnLabel) Chart() Chart {
	path := fmt.Sprintf(LabelPath, string(l))
	return Chart{Fits: "%[1]s" + path + ".hasValue()", Marks: []ChartMark{{Path: path, Presence: true}}, JobMarks: true}
}
