package runnerpod

import "slices"

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

// GitLab Runner's Kubernetes executor marks its build pods with the job and
// project (docs.gitlab.com/runner/executors/kubernetes, "Default labels for
// job pods", "Default annotations for job pods").
const (
	GitLabJobIDAnnotation   = "job.runner.gitlab.com/id"
	GitLabJobNameAnnotation = "job.runner.gitlab.com/name"
	GitLabJobURLAnnotation  = "job.runner.gitlab.com/url"
	GitLabProjectIDLabel    = "project.runner.gitlab.com/id"
)

// DefaultJobKeys are the keys of the fleets that state the job on the pod.
func (n PresetName) DefaultJobKeys() JobKeys {
	if n == GitLab {
		return JobKeys{
			ID: PodKey{Annotation: GitLabJobIDAnnotation}, Project: PodKey{Label: GitLabProjectIDLabel},
			Name: PodKey{Annotation: GitLabJobNameAnnotation}, URL: PodKey{Annotation: GitLabJobURLAnnotation},
		}
	}
	return JobKeys{}
}

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
