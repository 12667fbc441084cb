package check

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// ProbePrefix begins the name of every probe: the evicted pod that does
// not exist, and the dry-run pods' generated names.
const ProbePrefix = "runnerguard-check-"

// probeImage is never pulled: a dry run creates nothing.
const probeImage = "registry.k8s.io/pause:3.10"

// RunnerContainers are the runner containers in the webhook's runner-pod
// matchCondition (`object.spec.containers.exists(c, c.name in [...])`, or'd
// with `c.name.startsWith("...")` for a prefix, as the chart renders it),
// prefixes ended by runnerpod.AnyRest: the API server calls the webhook
// only for a pod with one of them, so a probe must carry them.
func RunnerContainers(conds []admissionregistrationv1.MatchCondition) ([]string, error) {
	for _, c := range conds {
		_, list, ok := strings.Cut(c.Expression, "c.name in ")
		if !ok {
			continue
		}
		end := strings.Index(list, "]")
		if !strings.HasPrefix(list, "[") || end < 0 {
			return nil, fmt.Errorf("matchCondition %q: no list literal after \"c.name in\"", c.Name)
		}
		var names []string
		if err := json.Unmarshal([]byte(list[:end+1]), &names); err != nil {
			return nil, fmt.Errorf("matchCondition %q: %w", c.Name, err)
		}
		for _, m := range startsWith.FindAllStringSubmatch(list[end:], -1) {
			var prefix string
			if err := json.Unmarshal([]byte(m[1]), &prefix); err != nil {
				return nil, fmt.Errorf("matchCondition %q: %w", c.Name, err)
			}
			names = append(names, prefix+runnerpod.AnyRest)
		}
		if len(names) == 0 {
			return nil, nil // no preset on
		}
		return names, nil
	}
	return nil, fmt.Errorf("no matchCondition names the runner containers")
}

// startsWith is a prefix term of the chart's runner-pod condition.
var startsWith = regexp.MustCompile(`c\.name\.startsWith\(("(?:[^"\\]|\\.)*")\)`)

// probeName is a probe's container for a runner container's name or
// prefix.
func probeName(pattern string) string {
	if prefix, ok := strings.CutSuffix(pattern, runnerpod.AnyRest); ok {
		return prefix + "probe"
	}
	return pattern
}

// ProbePod is a pod shaped as preset's runner pod, with every one of
// containers: the injector matches it to preset when that is on, to
// generic when only that is, and else not at all (presets.Match tries
// the fleets' marks in presets.Order). It passes Pod Security's
// restricted level and a LimitRange that wants requests and limits, so
// that only the injector's additions can make a namespace refuse it.
func ProbePod(ns string, preset runnerpod.PresetName, containers []string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: ProbePrefix + string(preset) + "-", Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
		},
	}
	for _, n := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: probeName(n)})
	}
	if f, ok := presets.For(preset); ok {
		f.Sample(pod)
	}
	small := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		c.Image = probeImage
		c.Resources = corev1.ResourceRequirements{Requests: small, Limits: small}
		c.SecurityContext = &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}
	}
	return pod
}

// InjectedPreset is the preset the injector wrote on an answered probe
// pod, "" when the pod came back without the injector's mark.
func InjectedPreset(got *corev1.Pod) runnerpod.PresetName {
	if got == nil || got.Labels[runnerpod.RunnerLabel] == "" {
		return ""
	}
	return runnerpod.PresetName(got.Annotations[runnerpod.PresetAnnotation])
}

// Failed classifies a dry run the API server refused: its call to the
// webhook failed (its own words, "failed calling webhook"), timed out, or
// something else refused the request.
func Failed(msg string) Outcome {
	switch {
	case !strings.Contains(msg, "failed calling webhook"):
		return Refused
	case strings.Contains(msg, "deadline exceeded") || strings.HasPrefix(msg, "Timeout:") || strings.Contains(msg, "Client.Timeout"):
		return TimedOut
	}
	return Unreachable
}

// RefusalDetail is a refused dry-run pod's message, told as the
// injector's work when the refusal names a volume only the injector adds:
// then the injector answered, and the namespace refuses what it adds.
func RefusalDetail(msg string) string {
	if strings.Contains(msg, cgroupVolume) || strings.Contains(msg, vitalsVolume) {
		return "the injector answered, and the namespace refuses what it adds to a runner pod (see docs/install/what-changes.md): " + msg
	}
	return msg
}

// The injector's volumes (webhook/inject's CgroupVolume and VitalsVolume;
// TestRefusalDetailNamesTheInjectorsVolumes holds them equal).
const (
	cgroupVolume = "runnerguard-cgroup"
	vitalsVolume = "runnerguard-vitals"
)

// Evicts reports whether w reviews evictions (CREATE of pods/eviction).
func Evicts(w admissionregistrationv1.ValidatingWebhook) bool {
	return reviews(w.Rules, "pods/eviction")
}

// Injects reports whether w reviews pod creation.
func Injects(w admissionregistrationv1.MutatingWebhook) bool {
	return reviews(w.Rules, "pods")
}

func reviews(rules []admissionregistrationv1.RuleWithOperations, resource string) bool {
	for _, r := range rules {
		ops := slices.Contains(r.Operations, admissionregistrationv1.Create) || slices.Contains(r.Operations, admissionregistrationv1.OperationAll)
		if ops && slices.Contains(r.Resources, resource) && (len(r.APIGroups) == 0 || slices.Contains(r.APIGroups, "") || slices.Contains(r.APIGroups, "*")) {
			return true
		}
	}
	return false
}
