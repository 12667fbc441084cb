package inject

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Result is what the injector did with a pod: the label of
// runnerguard_inject_total.
type Result string

// The results. Mutate returns the first five; the handler adds the last two.
const (
	// Injected: a runner pod instrumented, vitals sidecar included.
	Injected Result = "injected"
	// NoSidecar: a runner pod instrumented without the vitals sidecar,
	// because it is disabled or could not be added (see the warnings).
	NoSidecar Result = "no-sidecar"
	// OptedOut: the pod says runnerguard.io/inject: "false".
	OptedOut Result = "opted-out"
	// NotRunner: no enabled preset matches the pod.
	NotRunner Result = "not-runner"
	// Mirror: a kubelet's static pod, never touched.
	Mirror Result = "mirror"
	// Unchanged: a runner pod that already had everything (reinvocation,
	// or a copy of an instrumented pod created again).
	Unchanged Result = "unchanged"
	// Error: a request whose pod could not be decoded.
	Error Result = "error"
)

// Facts are what Mutate needs beyond the pod and the config: read by the
// handler from the admission request and the pod's namespace.
type Facts struct {
	// Requester is the username of the CREATE's requester.
	Requester string
	// Credential is the CREATE's credential id (its token's JTI), "" when
	// the request carried none.
	Credential string
	// BoundPod is the pod the CREATE's token was bound to, "" for none.
	BoundPod string
	// HostMountRefused, when not empty, says why the pod may not mount the
	// node's cgroup filesystem; the vitals sidecar is then left out.
	HostMountRefused string
	// PodResourcesDropped says the API server drops a pod's spec.resources
	// (see PodResourcesDropped): the sidecar is then sized and fitted as the
	// server will keep the pod, by its containers alone.
	PodResourcesDropped bool
}

// Outcome is Mutate's account of what it did.
type Outcome struct {
	Result Result
	// Preset is the matched preset; empty when no preset matched.
	Preset runnerpod.PresetName
	// Warnings say what was left undone, and why, for the admission response
	// and the log.
	Warnings []string
}

// psaEnforceLabel is Pod Security admission's namespace label
// (k8s.io/pod-security-admission/api).
const psaEnforceLabel = "pod-security.kubernetes.io/enforce"

// hostMountRemedy is what to change when Pod Security keeps the sidecar
// out.
const hostMountRemedy = "; to get the vitals, run the runners in a namespace labelled " + psaEnforceLabel + "=privileged (the guard and the death records work without them)"

// HostMountRefusal says why a namespace with these labels would refuse a
// pod with a hostPath volume, or returns "" when it would not. The
// namespace's enforce label decides; a namespace without one gets
// clusterDefault, the level the API server's AdmissionConfiguration
// enforces by default (config.Inject.PodSecurityDefault: a webhook cannot
// read it). A label Pod Security cannot parse is enforced as restricted,
// as Pod Security admission does (api.ParseLevel).
func HostMountRefusal(namespace string, labels map[string]string, clusterDefault string) string {
	level, labelled := labels[psaEnforceLabel]
	switch {
	case !labelled && (clusterDefault == config.PodSecurityBaseline || clusterDefault == config.PodSecurityRestricted):
		return fmt.Sprintf("namespace %q has no %s label and the cluster's default Pod Security level is %q, which forbids the hostPath volume of the node's cgroup filesystem that the sidecar reads"+hostMountRemedy, namespace, psaEnforceLabel, clusterDefault)
	case !labelled || level == config.PodSecurityPrivileged:
		return ""
	case level == config.PodSecurityBaseline || level == config.PodSecurityRestricted:
		return fmt.Sprintf("namespace %q enforces Pod Security level %q, which forbids the hostPath volume of the node's cgroup filesystem that the sidecar reads"+hostMountRemedy, namespace, level)
	}
	return fmt.Sprintf("namespace %q sets %s=%q, which Pod Security enforces as %q, which forbids the hostPath volume of the node's cgroup filesystem that the sidecar reads"+hostMountRemedy, namespace, psaEnforceLabel, level, config.PodSecurityRestricted)
}

// Mutate instruments pod in place if it is a runner pod and reports what it
// did. It is idempotent: a second call changes nothing. It never overwrites
// what the pod author chose, except its record of the pod's creation
// (runnerguard.io/created-by, and the job's env vars copied under
// runnerguard.io/env.*), which a pod must not be able to forge.
func Mutate(pod *corev1.Pod, facts Facts, cfg config.Config) Outcome {
	return mutate(pod, facts, cfg, nil)
}

// mutate is Mutate writing each change it makes to p as well.
func mutate(pod *corev1.Pod, facts Facts, cfg config.Config, p *patch) Outcome {
	if _, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return Outcome{Result: Mirror}
	}
	runner, ok := presets.Match(pod, cfg.Presets)
	if !ok {
		return Outcome{Result: NotRunner}
	}
	out := Outcome{Result: NoSidecar, Preset: runner.Preset.Name}
	// The pod watcher's cache holds labelled pods only; an opted-out pod's
	// death is on record too.
	setKey(p, &pod.Labels, "/metadata/labels", runnerpod.RunnerLabel, "true")
	if v, ok := pod.Annotations[runnerpod.Inject]; ok {
		inject, err := strconv.ParseBool(v)
		switch {
		case err != nil:
			out.Warnings = append(out.Warnings, fmt.Sprintf("runnerguard: annotation %s=%q is not a boolean; the pod is instrumented; set it to \"true\", or \"false\" to opt the pod out", runnerpod.Inject, v))
		case !inject:
			out.Result = OptedOut
			// created-by is the guard's evidence, not instrumentation: it is
			// recorded even on an opted-out pod, so the job's owner can still
			// end its job, its death is still told where its fleet's
			// controller made it, and the pod cannot forge either.
			recordCreator(p, pod, facts)
			recordJobEnv(p, pod, runner)
			return out
		}
	}

	annotate(p, pod, runner.Preset.Name, facts, cfg.Inject.PodAnnotations)
	recordJobEnv(p, pod, runner)
	prepareRunners(p, pod, runner, cfg)

	if !cfg.Inject.Vitals.Enabled {
		return out
	}
	reason := sidecarRefusal(pod, facts, cfg.Inject.Vitals)
	var sc *corev1.Container
	if reason == "" {
		sc, reason = newSidecar(kept(pod, facts), cfg.Inject.Vitals)
	}
	if reason != "" {
		out.Warnings = append(out.Warnings, "runnerguard: vitals sidecar not injected: "+reason)
		return out
	}
	out.Result = Injected
	out.Warnings = append(out.Warnings, addVitals(p, pod, sc, runner.Containers, cfg.Inject.Vitals)...)
	return out
}

// annotate adds the configured pod annotations where absent and records the
// preset and the creator, overwriting any value the pod came with: the
// creator names the owner of a job its owner ends by deleting the pod
// (GitLab), and the fleet's controller as the maker of a pod whose death is
// told on the job its record names (ARC).
func annotate(p *patch, pod *corev1.Pod, preset runnerpod.PresetName, facts Facts, extra map[string]string) {
	// In the keys' order, so that the same pod gets the same patch.
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		if _, ok := pod.Annotations[k]; !ok {
			setKey(p, &pod.Annotations, annotationsPath, k, extra[k])
		}
	}
	setKey(p, &pod.Annotations, annotationsPath, runnerpod.PresetAnnotation, string(preset))
	recordCreator(p, pod, facts)
}

const annotationsPath = "/metadata/annotations"

// recordCreator writes who created the pod, from which pod and with which
// credential,
// overwriting what the pod came with: neither may be forged by the pod.
func recordCreator(p *patch, pod *corev1.Pod, facts Facts) {
	setKey(p, &pod.Annotations, annotationsPath, runnerpod.CreatedBy, facts.Requester)
	setKey(p, &pod.Annotations, annotationsPath, runnerpod.CreatedFrom, facts.BoundPod)
	if facts.Credential == "" {
		deleteKey(p, pod.Annotations, annotationsPath, runnerpod.CreatedWith)
		return
	}
	setKey(p, &pod.Annotations, annotationsPath, runnerpod.CreatedWith, facts.Credential)
}

// recordJobEnv copies the env vars the preset reads the job from
// (runnerpod.PodKey.Env) into their annotations, as the runner containers
// set them at CREATE, overwriting or removing what the pod came with: the
// job is then what the pod's creator wrote into its runner's environment,
// which the reports trust only from a configured creator. A value set
// from elsewhere (valueFrom) is not the creator's word here, and is left
// out.
func recordJobEnv(p *patch, pod *corev1.Pod, runner runnerpod.Runner) {
	for _, name := range runner.Preset.Job.Envs() {
		key := runnerpod.EnvAnnotation(name)
		if v, ok := runnerEnv(pod, runner.Containers, name); ok {
			setKey(p, &pod.Annotations, annotationsPath, key, runnerpod.JobField(v))
		} else {
			deleteKey(p, pod.Annotations, annotationsPath, key)
		}
	}
}

// runnerEnv is the literal value of the env var name in the first of the
// pod's runner containers that sets it.
func runnerEnv(pod *corev1.Pod, runners []string, name string) (string, bool) {
	for _, c := range pod.Spec.Containers {
		if !slices.Contains(runners, c.Name) {
			continue
		}
		for _, e := range c.Env {
			if e.Name == name && e.ValueFrom == nil {
				return e.Value, true
			}
		}
	}
	return "", false
}

// addEnv appends the variables of env that c does not set itself. A
// variable the author set through envFrom cannot be seen here and would be
// overridden; presets keep their diagnostic env to runnerguard's own
// purposes, so that is accepted.
func addEnv(p *patch, c *corev1.Container, path string, env []corev1.EnvVar) {
	for _, e := range env {
		if !slices.ContainsFunc(c.Env, func(have corev1.EnvVar) bool { return have.Name == e.Name }) {
			appendItem(p, &c.Env, path+"/env", *e.DeepCopy())
		}
	}
}

// prepareRunners gives each runner container the preset's diagnostic
// environment and, where configured, the termination message policy that
// keeps the last log lines.
func prepareRunners(p *patch, pod *corev1.Pod, runner runnerpod.Runner, cfg config.Config) {
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if !slices.Contains(runner.Containers, c.Name) {
			continue
		}
		addEnv(p, c, containerPath(i), runner.Preset.DiagnosticEnv)
		// The API server defaults the policy to File, so File is taken as
		// "left to the default"; an author who chose FallbackToLogsOnError
		// already has it. The path is kept either way.
		if cfg.Inject.TerminationMessagePolicy && (c.TerminationMessagePolicy == "" || c.TerminationMessagePolicy == corev1.TerminationMessageReadFile) {
			setField(p, &c.TerminationMessagePolicy, containerPath(i)+"/terminationMessagePolicy", corev1.TerminationMessageFallbackToLogsOnError)
		}
	}
}
