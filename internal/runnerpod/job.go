package runnerpod

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
)

// JobKeys name where a fleet states, on its pods, the job a pod runs: for
// each of a record's job fields, a pod label or annotation. A home-grown
// pool names its own; ARC scale sets state the job in the EphemeralRunner
// instead, which the recorder reads.
type JobKeys struct {
	ID      PodKey `json:"id,omitempty"`
	Project PodKey `json:"project,omitempty"`
	Name    PodKey `json:"name,omitempty"`
	URL     PodKey `json:"url,omitempty"`
}

// PodKey is a pod label or annotation: one of the two is set. Labels are
// the better source where the fleet offers both: GitLab Runner refuses a
// job's own attempts to set labels under runner.gitlab.com, while a job
// may be allowed to overwrite annotations (pod_annotations_overwrite_allowed).
type PodKey struct {
	Label      string `json:"label,omitempty"`
	Annotation string `json:"annotation,omitempty"`
}

// Set reports whether the key names anything.
func (k PodKey) Set() bool { return k.Label != "" || k.Annotation != "" }

// Value is the key's value on a pod with these labels and annotations.
func (k PodKey) Value(labels, annotations map[string]string) string {
	if k.Label != "" {
		return labels[k.Label]
	}
	if k.Annotation != "" {
		return annotations[k.Annotation]
	}
	return ""
}

// Keys are the job's keys in field order.
func (j JobKeys) Keys() []PodKey { return []PodKey{j.ID, j.Project, j.Name, j.URL} }

// JobPodKeys are the labels and annotations the enabled presets read a job
// from: what a copy of a pod must keep for its job to be read, with the
// pod's recorded creator, who says whether the fleet wrote them.
func JobPodKeys(presets []Preset) (labels, annotations []string) {
	for _, p := range presets {
		if !p.Enabled {
			continue
		}
		if p.Job != (JobKeys{}) && !slices.Contains(annotations, CreatedBy) {
			annotations = append(annotations, CreatedBy)
		}
		for _, k := range p.Job.Keys() {
			if k.Label != "" && !slices.Contains(labels, k.Label) {
				labels = append(labels, k.Label)
			}
			if k.Annotation != "" && !slices.Contains(annotations, k.Annotation) {
				annotations = append(annotations, k.Annotation)
			}
		}
	}
	return labels, annotations
}

// maxJobField bounds each job field: annotations have no size of their own.
const maxJobField = 512

// JobFromPodMarks is the source of a job read from the pod's own labels
// and annotations (v1alpha1.Job.Source).
const JobFromPodMarks = "pod"

// JobFromPod is the job the pod's labels and annotations state under keys,
// or nil when they state none.
func JobFromPod(pod *corev1.Pod, keys JobKeys) *v1alpha1.Job {
	v := func(k PodKey) string { return JobField(k.Value(pod.Labels, pod.Annotations)) }
	j := &v1alpha1.Job{ID: v(keys.ID), Project: v(keys.Project), Name: v(keys.Name), URL: v(keys.URL), Source: JobFromPodMarks}
	if *j == (v1alpha1.Job{Source: JobFromPodMarks}) {
		return nil
	}
	j.CreatedBy = JobField(pod.Annotations[CreatedBy])
	return j
}

// JobField is s bounded as a record's job field: its first maxJobField
// bytes, cut at a character boundary (the fields come from JSON, so they
// are valid UTF-8 but for the cut).
func JobField(s string) string {
	if len(s) <= maxJobField {
		return s
	}
	return strings.ToValidUTF8(s[:maxJobField], "")
}
