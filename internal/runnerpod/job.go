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
	ID      PodKey `json:"id,omitzero"`
	Project PodKey `json:"project,omitzero"`
	Name    PodKey `json:"name,omitzero"`
	URL     PodKey `json:"url,omitzero"`
	// Commit, Forge and RepositoryID name the job's commit and where its
	// repository is, for a fleet whose deaths are told on the forge's
	// commit (Woodpecker).
	Commit       PodKey `json:"commit,omitzero"`
	Forge        PodKey `json:"forge,omitzero"`
	RepositoryID PodKey `json:"repositoryID,omitzero"`
}

// PodKey is a pod label, an annotation or a runner container's env var:
// one of the three is set. Labels are
// the better source where the fleet offers both: GitLab Runner refuses a
// job's own attempts to set labels under runner.gitlab.com, while a job
// may be allowed to overwrite annotations (pod_annotations_overwrite_allowed).
//
// An env var is read as the injector copied it at CREATE into the
// annotation EnvAnnotation(name): a fleet that states the job only in its
// runner's environment (Woodpecker's CI_* variables) is read from what
// its creator wrote, which a pod's spec keeps, and the watcher's cache,
// which keeps no spec, keeps the annotation.
type PodKey struct {
	Label      string `json:"label,omitempty"`
	Annotation string `json:"annotation,omitempty"`
	Env        string `json:"env,omitempty"`
}

// EnvAnnotationPrefix begins the annotations the injector copies a
// runner's env vars into (PodKey.Env).
const EnvAnnotationPrefix = "runnerguard.io/env."

// EnvAnnotation is the annotation that holds the runner's env var name.
func EnvAnnotation(name string) string { return EnvAnnotationPrefix + name }

// Set reports whether the key names anything.
func (k PodKey) Set() bool { return k.Label != "" || k.Annotation != "" || k.Env != "" }

// Value is the key's value on a pod with these labels and annotations.
func (k PodKey) Value(labels, annotations map[string]string) string {
	switch {
	case k.Label != "":
		return labels[k.Label]
	case k.Annotation != "":
		return annotations[k.Annotation]
	case k.Env != "":
		return annotations[EnvAnnotation(k.Env)]
	}
	return ""
}

// annotation is the annotation the key is read from, "" for a label.
func (k PodKey) annotation() string {
	if k.Env != "" && k.Label == "" && k.Annotation == "" {
		return EnvAnnotation(k.Env)
	}
	return k.Annotation
}

// Keys are the job's keys in field order.
func (j JobKeys) Keys() []PodKey {
	return []PodKey{j.ID, j.Project, j.Name, j.URL, j.Commit, j.Forge, j.RepositoryID}
}

// Envs are the runner env vars the keys name, which the injector copies
// at CREATE.
func (j JobKeys) Envs() []string {
	var out []string
	for _, k := range j.Keys() {
		if k.Env != "" && k.Label == "" && k.Annotation == "" && !slices.Contains(out, k.Env) {
			out = append(out, k.Env)
		}
	}
	return out
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
			if a := k.annotation(); a != "" && !slices.Contains(annotations, a) {
				annotations = append(annotations, a)
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
	j := &v1alpha1.Job{ID: v(keys.ID), Project: v(keys.Project), Name: v(keys.Name), URL: v(keys.URL),
		Commit: v(keys.Commit), Forge: v(keys.Forge), RepositoryID: v(keys.RepositoryID), Source: JobFromPodMarks}
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
