package recorder

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/notify"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// askerFunc answers JobEnded and counts the asks.
type askerFunc struct {
	asks   int
	runner string
	answer func() (time.Time, bool, error)
}

func (a *askerFunc) JobEnded(_ context.Context, _ notify.Target, runner string) (time.Time, bool, error) {
	a.asks++
	a.runner = runner
	return a.answer()
}

func TestJobsOverAsksAboutHeldRunnersAndTellsTheMarkerOfAJobLongOver(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	const controller = "system:serviceaccount:arc-systems:arc-gha-rs-controller"
	reports := config.Reports{Namespaces: []string{"ci"},
		GitHub: &config.GitHub{URL: "https://api.github.com/", AppID: 1, InstallationID: 2, Secret: "gh", Controllers: []string{controller}}}
	ended := now.Add(-20 * time.Minute)
	asker := &askerFunc{answer: func() (time.Time, bool, error) { return time.Time{}, false, nil }}
	var found []types.NamespacedName
	o := &JobsOver{Reports: reports, Askers: map[string]notify.JobAsker{notify.GitHub: asker}, Every: 10 * time.Minute, Grace: 5 * time.Minute,
		Now: func() time.Time { return now }, found: func(k types.NamespacedName) { found = append(found, k) },
		Job: func(context.Context, *corev1.Pod, runnerpod.Runner) *v1alpha1.Job {
			return &v1alpha1.Job{ID: "7311", Run: "900123", Project: "acme/app", Source: "EphemeralRunner/arc-runner-x7k2p", CreatedBy: controller}
		}}
	o.limiter = rate.NewLimiter(rate.Inf, 1)
	pod := podtest.ARCScaleSet("ci", "arc-runner-x7k2p").Obj()
	runner := runnerpod.Runner{Preset: runnerpod.Preset{Name: "arc-scale-set"}, Containers: []string{"runner"}}

	o.round(context.Background())
	assert.Zero(t, asker.asks, "a runner the marker does not hold is not asked about")

	o.Hold(pod, runner, true)
	o.round(context.Background())
	assert.Equal(t, 1, asker.asks)
	assert.Equal(t, pod.Name, asker.runner, "asked by the runner's name")
	_, ok := o.Of(pod)
	assert.False(t, ok, "its job runs")

	o.round(context.Background())
	assert.Equal(t, 1, asker.asks, "asked once per Every")

	now = now.Add(10 * time.Minute)
	asker.answer = func() (time.Time, bool, error) { return ended, true, nil }
	o.round(context.Background())
	assert.Equal(t, 2, asker.asks)
	z, ok := o.Of(pod)
	assert.True(t, ok)
	assert.Equal(t, runnerpod.Zombie{Kind: runnerpod.JobOverZombie, Since: ended}, z)
	assert.Equal(t, []types.NamespacedName{{Namespace: "ci", Name: pod.Name}}, found, "the marker judges it again")

	now = now.Add(time.Hour)
	o.round(context.Background())
	assert.Equal(t, 2, asker.asks, "a runner found over is not asked again")

	again := pod.DeepCopy()
	again.UID = "another"
	_, ok = o.Of(again)
	assert.False(t, ok, "a pod of the same name is another runner")

	o.forget(types.NamespacedName{Namespace: "ci", Name: pod.Name})
	_, ok = o.Of(pod)
	assert.False(t, ok, "forgotten with its pod")
}

func TestJobsOverAsksNothingOfARunnerItsReportsDoNotTrust(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	reports := config.Reports{Namespaces: []string{"ci"},
		GitHub: &config.GitHub{URL: "https://api.github.com/", AppID: 1, InstallationID: 2, Secret: "gh", Controllers: []string{"system:serviceaccount:arc-systems:arc-gha-rs-controller"}}}
	asker := &askerFunc{answer: func() (time.Time, bool, error) { return now.Add(-time.Hour), true, nil }}
	o := &JobsOver{Reports: reports, Askers: map[string]notify.JobAsker{notify.GitHub: asker}, Every: time.Minute, Grace: time.Minute,
		Now: func() time.Time { return now },
		Job: func(context.Context, *corev1.Pod, runnerpod.Runner) *v1alpha1.Job {
			return &v1alpha1.Job{ID: "7311", Run: "900123", Project: "acme/app", Source: "EphemeralRunner/arc-runner-x7k2p", CreatedBy: "system:serviceaccount:ci:reaper"}
		}}
	o.limiter = rate.NewLimiter(rate.Inf, 1)
	pod := podtest.ARCScaleSet("ci", "arc-runner-x7k2p").Obj()
	o.Hold(pod, runnerpod.Runner{Preset: runnerpod.Preset{Name: "arc-scale-set"}, Containers: []string{"runner"}}, true)
	o.round(context.Background())
	assert.Zero(t, asker.asks, "a pod its fleet's controller did not create: another's job must not free it")
	_, ok := o.Of(pod)
	assert.False(t, ok)
}
