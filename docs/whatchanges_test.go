package docs

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/recorder"
	"github.com/runnerguard/runnerguard/internal/refusal"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
	"github.com/runnerguard/runnerguard/webhook/inject"
)

// install/what-changes.md promises everything runnerguard adds to a runner
// pod: it names every label, annotation, volume, container, env variable
// and mount the injector adds to each fleet's pod, and every mark, label
// and annotation the leader writes on one later.
func TestWhatChangesNamesEverythingTheInjectorAndTheLeaderAdd(t *testing.T) {
	b, err := os.ReadFile("install/what-changes.md")
	require.NoError(t, err)
	page := string(b)
	cfg := configtest.Enforcing()
	names := map[string]bool{}
	for _, w := range []*podtest.Wrapper{podtest.ARCScaleSet("ci", "r"), podtest.GitLab("ci", "g"), podtest.Runner("ci", "p")} {
		before := w.Obj().DeepCopy()
		pod := w.Obj()
		for i := range pod.Spec.Containers {
			pod.Spec.Containers[i].TerminationMessagePolicy = ""
		}
		before = pod.DeepCopy()
		inject.Mutate(pod, inject.Facts{Requester: "system:serviceaccount:ci:creator", Credential: "JTI=1"}, cfg)
		for k := range pod.Labels {
			if _, had := before.Labels[k]; !had {
				names[k] = true
			}
		}
		for k := range pod.Annotations {
			if _, had := before.Annotations[k]; !had {
				names[k] = true
			}
		}
		for _, v := range pod.Spec.Volumes {
			if !slices.ContainsFunc(before.Spec.Volumes, func(o corev1.Volume) bool { return o.Name == v.Name }) {
				names[v.Name] = true
			}
		}
		for _, c := range pod.Spec.InitContainers {
			if !slices.ContainsFunc(before.Spec.InitContainers, func(o corev1.Container) bool { return o.Name == c.Name }) {
				names[c.Name] = true
			}
		}
		for i, c := range pod.Spec.Containers {
			was := before.Spec.Containers[i]
			for _, e := range c.Env {
				if !slices.ContainsFunc(was.Env, func(o corev1.EnvVar) bool { return o.Name == e.Name }) {
					names[e.Name] = true
				}
			}
			for _, m := range c.VolumeMounts {
				if !slices.ContainsFunc(was.VolumeMounts, func(o corev1.VolumeMount) bool { return o.MountPath == m.MountPath }) {
					names[m.MountPath] = true
				}
			}
			if p := c.TerminationMessagePolicy; p != was.TerminationMessagePolicy && p != "" {
				assert.Contains(t, page, "terminationMessagePolicy: "+string(p), "what-changes.md names the termination message policy set")
			}
		}
	}
	// The leader's: the marks a busy and an idle runner get (and its note
	// of which it set), the budget's label, the refusals, the job's start.
	pod := podtest.ARCScaleSet("ci", "r").RunningSince("runner", time.Now()).Obj()
	inject.Mutate(pod, inject.Facts{Requester: "system:serviceaccount:ci:creator"}, cfg)
	for _, busy := range []bool{true, false} {
		j := recorder.Judgement{Judged: true, Protection: presets.Protection{Busy: busy}}
		for k := range recorder.MarkPlan(pod, j, cfg.Marks) {
			names[k] = true
		}
	}
	for _, k := range []string{runnerpod.BudgetLabel, refusal.Annotation, runnerpod.JobAssignedAt} {
		names[k] = true
	}
	for _, n := range slices.Sorted(maps.Keys(names)) {
		assert.True(t, strings.Contains(page, "`"+n+"`") || strings.Contains(page, "`"+n+":") || strings.Contains(page, "`"+n+"="),
			"install/what-changes.md does not name %q, which runnerguard adds to a runner pod", n)
	}
}
