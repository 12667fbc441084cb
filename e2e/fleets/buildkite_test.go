//go:build fleets

package fleets

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/fleet/buildkite"
	"github.com/runnerguard/runnerguard/internal/notify"
	"github.com/runnerguard/runnerguard/internal/notify/notifytest"
)

// jobControllerUser is kube-controller-manager's job controller, which
// makes each Buildkite job's pod from the Kubernetes Job the stack creates.
const jobControllerUser = "system:serviceaccount:kube-system:job-controller"

// TestBuildkiteAgentStackK8s runs Buildkite's real agent-stack-k8s (built
// by hack/fleets/buildkite.sh) against a stand-in for Buildkite's Agent
// API, whose jobs real buildkite-agents run in the stack's pods, side by
// side, and checks that each job's pod gets the one record
// docs/install/fleets.md "Buildkite" promises.
func TestBuildkiteAgentStackK8s(t *testing.T) {
	f := startBuildkite(t)
	runCases(t, f, f.ns, "jobs", []fleetCase[*buildkiteFleet]{
		{"a job that succeeds is one clean exit", buildkiteSuccess},
		{"a reaper's delete and eviction of a running job are refused and it succeeds", buildkiteReaped},
		{"a command killed at its memory limit is one OOM record, the command's", buildkiteOOM},
		{"a job cancelled on Buildkite is ended by its agent, nothing of the stack's refused", buildkiteCancel},
	}, "")
}

func buildkiteSuccess(t *testing.T, f *buildkiteFleet) {
	id := "0194a000-0000-4000-8000-00000000000a"
	f.addJob(t, id, "build", "echo building; sleep 3; echo built")
	pod := f.jobPod(t, id)
	f.created(t, pod)
	res := f.finished(t, id)
	assert.Equal(t, "finished/0", res.State+"/"+res.ExitStatus)
	r := f.oneRecord(t, id, "build", pod)
	assert.Equal(t, string(death.CleanExit), r.Class, r.ClassBasis)
	assert.NotEqual(t, "checkout", r.Container, "the job's record is the part that ended last, not the checkout, which ended first")
	assert.Nil(t, r.Refusals)
	// The Kubernetes Job's own account, once the job controller gave it.
	require.Eventually(t, func() bool { return deathRecords(t, pod)[0].FleetView != nil }, 2*time.Minute+10*time.Second, time.Second,
		"the Job's own account on the record")
	if v := deathRecords(t, pod)[0].FleetView; assert.NotNil(t, v) {
		assert.Equal(t, "Complete=True", v.Condition+"="+v.Status, "%+v", v)
	}
	whyOf(t, pod, r)
}

// buildkiteReaped: a ServiceAccount with edit deletes, then evicts, the
// pod of a running job; both are refused and the job runs on.
func buildkiteReaped(t *testing.T, f *buildkiteFleet) {
	id := "0194a000-0000-4000-8000-00000000000b"
	f.addJob(t, id, "reaped", "echo building; sleep 25; echo built")
	pod := f.jobPod(t, id)
	f.created(t, pod)
	reaperUser := "system:serviceaccount:" + f.ns + ":" + tektonReaperSA
	err := deleteAndEvictRefused(t, f.reaper, reaperUser, pod, "a running job's pod")
	t.Logf("the reaper's delete: %v", err)
	res := f.finished(t, id)
	assert.Equal(t, "finished/0", res.State+"/"+res.ExitStatus, "the job went on and succeeded")
	assert.Contains(t, res.Log, "built")
	r := f.oneRecord(t, id, "reaped", pod)
	assert.Equal(t, string(death.CleanExit), r.Class, r.ClassBasis)
	assertDeleteAndEvictionRefused(t, r, reaperUser)
}

// buildkiteOOM: dd allocates more than the command container's limit.
func buildkiteOOM(t *testing.T, f *buildkiteFleet) {
	id := "0194a000-0000-4000-8000-00000000000c"
	f.addJob(t, id, "oom", "echo building; sleep 2; dd if=/dev/zero of=/dev/null bs=200M count=1")
	pod := f.jobPod(t, id)
	f.created(t, pod)
	res := f.finished(t, id)
	assert.Equal(t, "finished", res.State)
	assert.NotEqual(t, "0", res.ExitStatus, "the job failed")
	r := f.oneRecord(t, id, "oom", pod)
	assert.Equal(t, string(death.CgroupOOM), r.Class, r.ClassBasis)
	assert.Equal(t, "container-0", r.Container, "the command's container")
	assert.Equal(t, "OOMKilled", r.Reason, "the runtime's reason")
	assert.True(t, r.OOMConfirmed != nil && *r.OOMConfirmed, "the OOM is confirmed")
	if v := r.Vitals; assert.NotNil(t, v, "the vitals' last reading") {
		t.Logf("vitals: %d OOM kills (watch %s), first at %v; peak %s (unknown %v), limit %s",
			v.OOMKill, v.OOMWatch, v.OOMKillAt, orNone(v.Peak), v.PeakUnknown, orNone(v.Limit))
		assert.GreaterOrEqual(t, v.OOMKill, int64(1), "OOM kills counted")
		if assert.NotNil(t, v.Limit) {
			assert.Equal(t, int64(96<<20), *v.Limit, "the command container's own limit")
		}
	}
	assert.Nil(t, r.Refusals)
	whyOf(t, pod, r)
	assertBuildkiteReport(t, pod, id)
}

// assertBuildkiteReport checks the report of job id's death: one
// annotation on its build in the job's context, style error, after
// Buildkite (the stand-in, from the real agent's registration) said the
// job ran on an agent whose host is the pod, and naming no principal.
func assertBuildkiteReport(t *testing.T, pod podRef, id string) {
	t.Helper()
	_, _, rep := settledReport(t, pod, notify.Buildkite)
	require.Equal(t, notify.PhaseSent, rep.Phase, rep.Message)
	var got []notifytest.Annotation
	for _, a := range buildkiteAPI.Annotations() {
		if a.Context == notify.AnnotationContext(id) {
			got = append(got, a)
		}
	}
	require.Len(t, got, 1, "one annotation of the job")
	assert.Equal(t, buildkiteBuild, got[0].Build)
	assert.Equal(t, "error", got[0].Style)
	assert.Equal(t, 1, got[0].Writes, "told once")
	assert.NotContains(t, got[0].Body, jobControllerUser, "a build's page may be public")
	assert.Empty(t, buildkiteAPI.Errors(), "requests outside Buildkite's published shapes")
	keepReport(t, "buildkite-annotation.json", got[0])
}

// buildkiteCancel: the job is cancelled on Buildkite; its agent sees it on
// its next state poll, interrupts the command and finishes the job
// (canceled), and ends. Whatever the stack and the job controller do to the
// pod after that is not refused.
func buildkiteCancel(t *testing.T, f *buildkiteFleet) {
	id := "0194a000-0000-4000-8000-00000000000d"
	f.addJob(t, id, "cancelled", "echo building; sleep 600")
	pod := f.jobPod(t, id)
	f.created(t, pod)
	time.Sleep(3 * time.Second)
	require.NoError(t, f.api.Cancel(id))
	res := f.finished(t, id)
	assert.Equal(t, "canceled", res.State)
	assert.Equal(t, "cancel", res.SignalReason, "the agent's reason")
	r := f.oneRecord(t, id, "cancelled", pod)
	assert.False(t, death.Class(r.Class).Abnormal(), "a cancel its agent carried out is the job's end, not a death: %s (%s)", r.Class, r.ClassBasis)
	t.Logf("refusals on the record: %+v", r.Refusals)
	assert.Nil(t, r.Refusals, "nothing refused: the stack's and the job controller's work after the agent ended")
	out, err := runnerguardRefusals(f.ns, pod.name)
	t.Logf("kubectl runnerguard refusals %s -n %s (err %v):\n%s", pod.name, f.ns, err, out)
	for _, who := range []string{f.controller, jobControllerUser} {
		assert.NotContains(t, out, who, "refused to %s", who)
	}
	whyOf(t, pod, r)
}

// created checks what the injector recorded of the pod: the job
// controller made it, and the preset is Buildkite's.
func (f *buildkiteFleet) created(t *testing.T, pod podRef) {
	t.Helper()
	p := assertCreated(t, pod, jobControllerUser, string(buildkite.Name))
	var names []string
	for _, c := range p.Spec.InitContainers {
		names = append(names, "init:"+c.Name)
	}
	for _, c := range p.Spec.Containers {
		names = append(names, c.Name)
	}
	t.Logf("job pod %s: containers %s", pod.name, strings.Join(names, ", "))
}

// oneRecord waits for the record of job id's pod, checks that it is the
// only one and names the job (its UUID, URL, pipeline and step), and
// returns it.
func (f *buildkiteFleet) oneRecord(t *testing.T, id, step string, pod podRef) death.Record {
	t.Helper()
	r := onlyRecord(t, pod, "job "+id)
	assert.Equal(t, string(buildkite.Name), r.Preset)
	if assert.NotNil(t, r.Job, "the record names the job") {
		assert.Equal(t, id, r.Job.ID, "the job's UUID")
		assert.Equal(t, f.api.BuildURL("app")+"#"+id, r.Job.URL)
		assert.Equal(t, "app", r.Job.Project, "the pipeline")
		assert.Equal(t, step, r.Job.Name, "the step's key")
	}
	assertTimes(t, pod, r)
	return r
}
