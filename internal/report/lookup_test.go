package report

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

func fakeClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, v1alpha1.AddToScheme(s))
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

func recorded(t *testing.T, w *podtest.Wrapper, deletedBy string) *v1alpha1.RunnerDeath {
	t.Helper()
	pod := w.Obj()
	runner, ok := presets.Match(pod, configtest.Enforcing().Presets)
	require.True(t, ok)
	r := death.New(pod, runner, runnerpod.RunnerStatus(pod, runner.Containers))
	r.DeletedBy = deletedBy
	return r.Object()
}

func TestLookupOfAPodThatIsGoneReadsItsRunnerDeath(t *testing.T) {
	c := fakeClient(t, recorded(t, podtest.Runner("ci", "r").Terminated("runner", 137, "OOMKilled"), "reaper"),
		recorded(t, podtest.Runner("ci", "other").Terminated("runner", 1, "Error"), ""))
	rep, err := Lookup(context.Background(), c, configtest.Enforcing().Presets, "ci", "r")
	require.NoError(t, err)
	assert.False(t, rep.Exists)
	require.Len(t, rep.Records, 1, "only this pod's records")
	assert.Equal(t, string(death.CgroupOOM), rep.Records[0].Class)
	assert.Equal(t, "reaper", rep.Records[0].DeletedBy)
	text := rep.Text()
	assert.Contains(t, text, `runner "runner" died: cgroup-oom`)
	assert.Contains(t, text, "pod deleted afterwards by reaper")
}

func TestLookupOfALivePodMergesItsStatusWithItsRecord(t *testing.T) {
	w := podtest.Runner("ci", "r").Terminated("runner", 2, "Error")
	c := fakeClient(t, w.Obj())
	rep, err := Lookup(context.Background(), c, configtest.Enforcing().Presets, "ci", "r")
	require.NoError(t, err)
	assert.True(t, rep.Exists)
	require.Len(t, rep.Records, 1, "from the status, not on record yet")
	require.NoError(t, c.Create(context.Background(), recorded(t, w, "bob")))
	rep, err = Lookup(context.Background(), c, configtest.Enforcing().Presets, "ci", "r")
	require.NoError(t, err)
	require.Len(t, rep.Records, 1, "one death, from status and record")
	assert.Equal(t, "bob", rep.Records[0].DeletedBy, "the record wins")
}

func TestLookupIgnoresAnEarlierPodOfTheSameName(t *testing.T) {
	old := recorded(t, podtest.Runner("ci", "r").Terminated("runner", 1, "Error"), "")
	old.Record.UID = "an-earlier-uid"
	old.Name = "r.earlier"
	c := fakeClient(t, old, podtest.Runner("ci", "r").Running("runner").Obj())
	rep, err := Lookup(context.Background(), c, configtest.Enforcing().Presets, "ci", "r")
	require.NoError(t, err)
	assert.Empty(t, rep.Records)
}

func TestLookupNeverBelievesAnEvent(t *testing.T) {
	// Anyone who may create Events could write this one.
	forged := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "r.forged"}, Reason: death.ReasonDied,
		Note: `runner "runner" died: clean-exit`}
	rep, err := Lookup(context.Background(), fakeClient(t, forged), configtest.Enforcing().Presets, "ci", "r")
	require.NoError(t, err)
	assert.Empty(t, rep.Records)
	assert.Contains(t, rep.Text(), "pod ci/r is gone and no runnerguard record of it remains")
	assert.Contains(t, rep.Text(), "retention")
}

func TestLookupOfARunningRunner(t *testing.T) {
	c := fakeClient(t, podtest.Runner("ci", "r").Running("runner").Obj())
	rep, err := Lookup(context.Background(), c, configtest.Enforcing().Presets, "ci", "r")
	require.NoError(t, err)
	assert.Equal(t, "pod ci/r: its runner is running; no death on record\n", rep.Text())
}

func TestSummarizeCountsByClassWithinTheWindow(t *testing.T) {
	oom := recorded(t, podtest.Runner("ci", "a").Terminated("runner", 137, "OOMKilled"), "")
	oom.CreationTimestamp = metav1.NewTime(podtest.Start.Add(2 * 3600e9))
	clean := recorded(t, podtest.Runner("ci", "b").Terminated("runner", 0, "Completed"), "")
	clean.CreationTimestamp = metav1.NewTime(podtest.Start.Add(2 * 3600e9))
	old := recorded(t, podtest.Runner("ci", "c").Terminated("runner", 1, "Error"), "")
	old.CreationTimestamp = metav1.NewTime(podtest.Start)
	f := Summarize([]v1alpha1.RunnerDeath{*oom, *clean, *old}, podtest.Start.Add(3600e9))
	assert.Equal(t, 2, f.Total)
	assert.Equal(t, map[string]int{"cgroup-oom": 1, "clean-exit": 1}, f.ByClass)
	table := f.Table(24*3600e9, true, 10)
	assert.Regexp(t, `(?s)CLASS.*cgroup-oom\s+1.*clean-exit\s+1.*most recent:.*ci\s+a\s+cgroup-oom\s+137\s+OOMKilled`, table, "abnormal classes first")
	assert.NotContains(t, table, "error-exit", "outside the window")
}

func TestLookupOfALiveZombieSaysWhatItIsAndSinceWhen(t *testing.T) {
	z := runnerpod.Zombie{Kind: "spent-config", Since: podtest.Start}
	c := fakeClient(t, podtest.ARCScaleSet("ci", "r").Running("runner").Annotate(runnerpod.ZombieAnnotation, z.Value()).Obj())
	rep, err := Lookup(context.Background(), c, configtest.Enforcing().Presets, "ci", "r")
	require.NoError(t, err)
	require.NotNil(t, rep.Zombie)
	assert.Equal(t, "spent-config", rep.Zombie.Kind)
	assert.Contains(t, rep.Text(), "it is a zombie, spent-config since 2026-11-01T12:00:00Z: its EphemeralRunner's job was assigned before this pod was created")

	c = fakeClient(t, podtest.ARCScaleSet("ci", "r").Running("runner").Obj())
	rep, err = Lookup(context.Background(), c, configtest.Enforcing().Presets, "ci", "r")
	require.NoError(t, err)
	assert.Nil(t, rep.Zombie, "a busy runner the leader never named is no zombie")
	assert.NotContains(t, rep.Text(), "zombie")
}
