//go:build fleets

package fleets

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerguard/runnerguard/e2e/fleets/gitlabapi"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/notify/notifytest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// reaper is the fleet's own cleanup worker, the usual killer of busy
// runners: it may delete pods, and runnerguard must refuse it a busy one.
const reaper = "system:serviceaccount:ci-infra:orphan-reaper"

// jobStarted is the first line of every case's script: the job is running
// once the coordinator's trace holds it.
const jobStarted = "fleet-job-started"

// gitlabCase is one job and what must be recorded about it.
type gitlabCase struct {
	name    string
	script  []string
	timeout time.Duration
	// during acts on the running job (its pod's name given).
	during func(t *testing.T, m *manager, id int64, pod string)
	// refusedBy: during is this principal's refused delete, which the
	// record keeps ("": nothing is refused); warned: warn mode let it
	// through, and the record keeps what enforce would have refused.
	refusedBy string
	warned    bool
	// onPurpose: during ends the job on purpose (the override, a drain's
	// deadline): its commit status is skipped, never failed.
	onPurpose bool
	// serial: the case runs alone, after the others (a drain cordons the
	// suite's one node).
	serial bool
	// state and reasons are the job's last state and failure reason as
	// the runner reports them: the proof that the runner saw what the case
	// did (a cancel, its timeout, the OOM). Where the runner's own race
	// decides the reason, reasons lists each it may report; none: no
	// reason.
	state   string
	reasons []string
	class   death.Class
	// check asserts what else the class implies.
	check func(t *testing.T, m *manager, r death.Record)
}

var gitlabCases = []gitlabCase{{
	name:   "a job that succeeds ends by its manager's delete",
	script: []string{"echo " + jobStarted, "sleep 3", "echo fleet-job-done"},
	state:  "success", class: death.JobEnded, check: endedByManager,
}, {
	name:   "a reaper's delete of the running job is refused and the job succeeds",
	script: []string{"echo " + jobStarted, "sleep 20", "echo fleet-job-done"},
	during: reaperRefused, refusedBy: reaper,
	state: "success", class: death.JobEnded, check: endedByManager,
}, {
	name:   "a cancelled job ends by its manager's delete",
	script: []string{"echo " + jobStarted, "sleep 600"},
	during: func(t *testing.T, m *manager, id int64, _ string) { m.coord.Cancel(id) },
	// GitLab Runner's own reason, job_canceled, never goes to GitLab
	// (its common/network.go): it reports what GitLab supports.
	state: "failed", reasons: []string{"unknown_failure"}, class: death.JobEnded, check: endedByManager,
}, {
	name:    "a job past the service's timeout is job-timeout",
	script:  []string{"echo " + jobStarted, "sleep 600"},
	timeout: 30 * time.Second,
	state:   "failed", reasons: []string{"job_execution_timeout"}, class: death.JobTimeout, check: endedByManager,
}, {
	name:   "a process killed at the build container's memory limit is process-oom",
	script: []string{"echo " + jobStarted, "dd if=/dev/zero of=/dev/null bs=200M count=1"},
	state:  "failed", reasons: []string{"script_failure"}, class: death.ProcessOOM, check: processOOM,
}, {
	// The writers fill the memory-backed volume past the build
	// container's limit. Those pages are charged to the container but
	// belong to no process, so no kill frees them: the kernel kills again
	// at each page a writer still charges, the process with the most
	// resident memory first. A writer with a 4k buffer holds the least, so
	// the shells go first, the container's main shell (the one the
	// manager attaches to) among them, and the container ends at the kill.
	// The sleep lets the first line reach the trace before the kills end
	// the job.
	name: "a job that fills the build container's memory is cgroup-oom",
	script: []string{"echo " + jobStarted, "sleep 2",
		"dd if=/dev/zero of=" + ramdisk + "/a bs=4k count=25600 &",
		"dd if=/dev/zero of=" + ramdisk + "/b bs=4k count=25600 &",
		"wait", "echo fleet-job-done"},
	// script_failure when the stage's exit status reaches the runner (a
	// wrapper shell outlived the step's) before its poll of the pod sees
	// the build container ended, runner_system_failure after.
	state: "failed", reasons: []string{"script_failure", "runner_system_failure"}, class: death.CgroupOOM, check: cgroupOOM,
}, {
	// The executor fails the job as soon as its pod watch sees the
	// deletion (a system failure); the build container's main shell
	// ignores the SIGTERM and ends by the SIGKILL a grace period later.
	name:   "a running job's pod deleted through the override is told on its commit as skipped",
	script: []string{"echo " + jobStarted, "sleep 600"},
	during: overridden, refusedBy: oncall, onPurpose: true,
	state: "failed", reasons: []string{"runner_system_failure"}, class: death.SigKill, check: endedByOverride,
}, {
	// Evicted while the node was cordoned: node-disrupted.
	name:   "a running job ended by a drain's deadline is told on its commit as skipped",
	script: []string{"echo " + jobStarted, "sleep 600"},
	during: drained, onPurpose: true, serial: true,
	state: "failed", reasons: []string{"runner_system_failure"}, class: death.NodeDisrupted, check: endedByDrain,
}}

// nextJobID numbers the coordinator's jobs across layouts.
var nextJobID atomic.Int64

func TestGitLabRunnerKubernetesExecutor(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			m := startManager(t, l)
			if !runGitLabCases(t, m, gitlabCases) {
				return // the counts below are of every case's record
			}
			t.Run("reports", func(t *testing.T) { assertGitLabReportsOfLayout(t, m) })
			// Five deaths (the timeout, the two OOMs, the override and the
			// drain) and three job ends.
			out := runnerguardDeaths(t, m.buildNS)
			assert.Equal(t, "5 runner deaths and 3 job ends on record", strings.SplitN(out, "\n", 2)[0], out)
		})
	}
}

// runGitLabCases runs cases side by side as m's jobs, then the serial
// ones one by one; it reports whether every case ran and passed, so that
// a count of their records means something.
func runGitLabCases(t *testing.T, m *manager, cases []gitlabCase) bool {
	t.Helper()
	var ran atomic.Int64
	t.Run("jobs", func(t *testing.T) {
		for _, c := range cases {
			if c.serial {
				continue
			}
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				ran.Add(1)
				runGitLabCase(t, m, c)
			})
		}
	})
	for _, c := range cases {
		if c.serial && !t.Failed() {
			t.Run(c.name, func(t *testing.T) {
				ran.Add(1)
				runGitLabCase(t, m, c)
			})
		}
	}
	return !t.Failed() && ran.Load() == int64(len(cases))
}

func runGitLabCase(t *testing.T, m *manager, c gitlabCase) {
	id := 1000 + nextJobID.Add(1)
	timeout := c.timeout
	if timeout == 0 {
		timeout = 10 * time.Minute
	}
	m.coord.Add(gitlabapi.Job{ID: id, Name: "fleet-" + strconv.FormatInt(id, 10), Image: buildImage, Script: c.script, Timeout: timeout})
	// GitLab knows the job, on a commit of its own.
	gitlabAPI.AddJob(notifytest.Job{Project: gitlabProject, ID: strconv.FormatInt(id, 10), SHA: headSHA(id), Ref: "main", Pipeline: id})
	pod := buildPod(t, m, id)
	require.Eventually(t, func() bool { return strings.Contains(m.coord.Result(id).Trace, jobStarted+"\n") },
		2*time.Minute, 250*time.Millisecond, "job %d to start (trace so far: %q)", id, m.coord.Result(id).Trace)
	if c.during != nil {
		c.during(t, m, id, pod.name)
	}
	gone(t, pod)
	res := m.coord.Result(id)
	assert.Equal(t, c.state, res.State, "the runner's last report of job %d: %+v", id, res)
	reasons := c.reasons
	if len(reasons) == 0 {
		reasons = []string{""}
	}
	assert.Contains(t, reasons, res.FailureReason, "the runner's failure reason of job %d", id)
	recs := deathRecords(t, pod)
	require.Len(t, recs, 1, "one record of job %d's build pod", id)
	r := recs[0]
	t.Logf("record of job %d: class %s (%s), started %v, job started %v, deleted %v by %s (%s), finished %v",
		id, r.Class, r.ClassBasis, r.StartedAt, r.JobStartedAt, r.DeletedAt, r.DeletedBy, r.DeleteRule, r.FinishedAt)
	assert.Equal(t, string(c.class), r.Class, "class of job %d: %s", id, r.ClassBasis)
	assertJob(t, id, r)
	assertTimes(t, pod, r)
	assertWhyTimes(t, runnerguardWhy(t, m.buildNS, pod.name), r)
	assertRefusals(t, r, c.refusedBy, c.warned)
	if c.check != nil {
		c.check(t, m, r)
	}
	m.ran.add(ranJob{id: id, pod: pod, class: death.Class(r.Class)})
	assertGitLabReport(t, m, id, pod, death.Class(r.Class), c.onPurpose)
}

// assertJob checks that the record names job id as the runner marked it.
func assertJob(t *testing.T, id int64, r death.Record) {
	t.Helper()
	if assert.NotNil(t, r.Job, "the record names the job") {
		assert.Equal(t, strconv.FormatInt(id, 10), r.Job.ID)
		assert.Equal(t, "fleet-"+strconv.FormatInt(id, 10), r.Job.Name)
		assert.Equal(t, "7", r.Job.Project)
		assert.True(t, strings.HasSuffix(r.Job.URL, "/-/jobs/"+strconv.FormatInt(id, 10)), "job url %q", r.Job.URL)
	}
}

// assertTimes checks the record's times against each other and the pod's.
func assertTimes(t *testing.T, pod podRef, r death.Record) {
	t.Helper()
	require.NotNil(t, r.StartedAt, "the runner's start")
	require.NotNil(t, r.FinishedAt, "the runner's end")
	assert.False(t, r.FinishedAt.Before(r.StartedAt), "ended %v before it started %v", r.FinishedAt, r.StartedAt)
	if assert.NotNil(t, r.JobStartedAt, "the job's start (the pod's)") {
		assert.True(t, r.JobStartedAt.Equal(&pod.startTime), "the job started with the pod: %v, pod %v", r.JobStartedAt, pod.startTime)
		assert.False(t, r.StartedAt.Before(r.JobStartedAt), "the build container started %v before its pod %v", r.StartedAt, r.JobStartedAt)
	}
}

// assertRefusals checks the refusals the record kept: by's one delete
// when by is named (warned: warn mode's, which enforce would have
// refused), else none (the manager's own creates, execs, attaches and
// deletes are never refused).
func assertRefusals(t *testing.T, r death.Record, by string, warned bool) {
	t.Helper()
	if by == "" {
		assert.Nil(t, r.Refusals, "the fleet's own work refused")
		return
	}
	if assert.NotNil(t, r.Refusals, "the refusal of %s on the record", by) && assert.Len(t, r.Refusals.Entries, 1, "%+v", r.Refusals) {
		e := r.Refusals.Entries[0]
		assert.Equal(t, by, e.By)
		assert.Equal(t, "delete", e.Verb)
		assert.Equal(t, int32(1), e.Count)
		assert.Equal(t, string(runnerpod.RuleBusy), e.Rule)
		assert.Equal(t, warned, e.Warned, "warn mode's entry")
	}
}

// assertWhyTimes checks that `why` ends the job where it ended: at its
// owner's delete when a deletion came before the container's end (apart
// from the container's last kill a grace period later), else with the
// container (an OOM kill of the container).
func assertWhyTimes(t *testing.T, why string, r death.Record) {
	t.Helper()
	if r.JobStartedAt == nil || r.FinishedAt == nil {
		return // asserted apart
	}
	ts := func(m *metav1.Time) string { return m.UTC().Format(time.RFC3339) }
	switch {
	case death.Class(r.Class) == death.JobEnded && r.DeletedAt != nil:
		assert.Contains(t, why, "the job ran "+ts(r.JobStartedAt)+" to "+ts(r.DeletedAt)+" ", "the job's end is the delete")
	case r.DeletedAt != nil && r.DeletedAt.Before(r.FinishedAt):
		assert.Contains(t, why, "its pod's deletion began at "+ts(r.DeletedAt)+", ", "the job's end apart from the last kill")
	default:
		assert.Contains(t, why, "the job ran "+ts(r.JobStartedAt)+" to "+ts(r.FinishedAt)+" ", "no deletion came first: the job ended with the container")
	}
}

// endedByManager: the manager's delete ended the job. A job's end says
// its outcome is unknown to the cluster (a cancel, a success and a failure
// are the same delete), and `why` marks the last words the build container
// wrote after the delete began.
func endedByManager(t *testing.T, m *manager, r death.Record) {
	t.Helper()
	assert.Equal(t, m.username, r.DeletedBy)
	assert.Equal(t, string(runnerpod.RuleJobOwner), r.DeleteRule)
	if assert.NotNil(t, r.DeletedAt) {
		assert.False(t, r.FinishedAt.Before(r.DeletedAt), "the container ended %v before the delete %v", r.FinishedAt, r.DeletedAt)
	}
	if death.Class(r.Class) != death.JobEnded {
		return
	}
	assert.Equal(t, death.OutcomeUnknown, r.ClassBasis)
	why := runnerguardWhy(t, m.buildNS, r.Pod)
	assert.Contains(t, why, "the job's outcome is unknown to the cluster")
	if r.Message != "" && r.DeletedAt != nil && r.FinishedAt.After(r.DeletedAt.Time) {
		assert.Contains(t, why, "lines near the end may come after the job's end")
	}
}

// processOOM: one process was killed at the limit, the container lived on
// until the manager's delete.
func processOOM(t *testing.T, m *manager, r death.Record) {
	t.Helper()
	assertOOMVitals(t, r)
	assert.Equal(t, m.username, r.DeletedBy)
	if assert.NotNil(t, r.DeletedAt, "the manager's delete ended the container") {
		assert.True(t, r.DeletedAt.Before(r.FinishedAt), "the container outlived the delete")
		if r.Vitals != nil && r.Vitals.OOMKillAt != nil {
			assert.False(t, r.DeletedAt.Before(r.Vitals.OOMKillAt), "deleted %v before the OOM kill %v", r.DeletedAt, r.Vitals.OOMKillAt)
		}
	}
}

// cgroupOOM: the kernel killed the build container's every process at its
// limit, its main shell among them: the container ended at the kill, with
// the runtime's reason OOMKilled (the manager deleted the pod after).
func cgroupOOM(t *testing.T, m *manager, r death.Record) {
	t.Helper()
	assertOOMVitals(t, r)
	if v := r.Vitals; v != nil {
		t.Logf("vitals: %d OOM kills (watch %s), first at %v; peak %s (unknown %v), limit %s; the container ended %v",
			v.OOMKill, v.OOMWatch, v.OOMKillAt, orNone(v.Peak), v.PeakUnknown, orNone(v.Limit), r.FinishedAt)
	}
	assert.Equal(t, "OOMKilled", r.Reason, "the runtime's reason")
	if assert.NotNil(t, r.ExitCode) {
		assert.Equal(t, int32(137), *r.ExitCode, "the main shell's SIGKILL")
	}
	if v := r.Vitals; v != nil && v.Limit != nil {
		// No stale figure: the kernel's high-water mark, or none.
		peakRead := v.Peak != nil && *v.Peak >= *v.Limit/10*9
		assert.True(t, peakRead || v.PeakUnknown, "the peak is read at the limit or said unknown: %+v", v.Memory)
	}
	// The kill ended the container and the job: no deletion ended it. The
	// manager's delete after the failed job is on the record when the
	// guard reviewed it, which it does only while the API server's status
	// still shows the container running (the kubelet's report of its end
	// may come before or after that delete).
	assert.False(t, r.Deleted, "no deletion ended the container")
	assert.Nil(t, r.DeletedAt, "no deletion ended the container")
	assert.Contains(t, []string{m.username, ""}, r.DeletedBy, "the manager's delete after the kill, when reviewed")
	assert.Contains(t, r.ClassBasis, "the kill ended the container", "what the class rests on")
	why := runnerguardWhy(t, m.buildNS, r.Pod)
	assert.Contains(t, why, "the container hit its memory limit and the kernel OOM-killed it")
	assert.Contains(t, why, "and ended with the container, at the OOM kill\n")
	assert.NotContains(t, why, "ended by its pod's deletion")
}

func assertOOMVitals(t *testing.T, r death.Record) {
	t.Helper()
	if assert.NotNil(t, r.Vitals, "the vitals' last reading") {
		assert.GreaterOrEqual(t, r.Vitals.OOMKill, int64(1), "OOM kills counted")
		if assert.NotNil(t, r.Vitals.Limit) {
			assert.Equal(t, int64(96<<20), *r.Vitals.Limit, "the build container's own limit")
		}
		assert.NotNil(t, r.Vitals.OOMKillAt, "the kill's time")
	}
	assert.True(t, r.OOMConfirmed != nil && *r.OOMConfirmed, "the OOM is confirmed")
}

// reaperRefused: a reaper's delete of the running build pod is refused.
func reaperRefused(t *testing.T, m *manager, _ int64, pod string) {
	t.Helper()
	err := as(t, reaper).CoreV1().Pods(m.buildNS).Delete(context.Background(), pod, deleteOptions())
	require.Error(t, err, "the reaper's delete of a running job's pod")
	assert.True(t, isForbidden(err), "refused: %v", err)
	waitEvent(t, m.buildNS, pod, "DeleteRefused", reaper)
	named := assert.Eventually(t, func() bool {
		out, err := runnerguardRefusals(m.buildNS, pod)
		return err == nil && strings.Contains(out, reaper)
	}, time.Minute, 500*time.Millisecond, "kubectl runnerguard refusals to name the reaper while the job runs")
	if !named {
		out, err := runnerguardRefusals(m.buildNS, pod)
		t.Logf("kubectl runnerguard refusals %s -n %s (err %v):\n%s", pod, m.buildNS, err, out)
	}
}

// overridden: the on-call's delete of the running build pod is refused
// until they write the override on it; then it goes.
func overridden(t *testing.T, m *manager, _ int64, pod string) {
	t.Helper()
	ctx := context.Background()
	grantOverride(t, m.buildNS, oncall)
	pods := asUser(t, oncall).CoreV1().Pods(m.buildNS)
	err := pods.Delete(ctx, pod, deleteOptions())
	require.True(t, isForbidden(err), "a running job's delete without the override is refused: %v", err)
	waitEvent(t, m.buildNS, pod, "DeleteRefused", oncall)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, runnerpod.AllowDelete, "pipeline wedged; retry it")
	_, err = pods.Patch(ctx, pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err, "the on-call writes the override")
	require.NoError(t, pods.Delete(ctx, pod, deleteOptions()), "the delete goes through the override")
}

// endedByOverride: the on-call's delete ended the job, under the override
// and its reason.
func endedByOverride(t *testing.T, m *manager, r death.Record) {
	t.Helper()
	assert.True(t, r.Deleted, "the deletion ended the container")
	assert.Equal(t, oncall, r.DeletedBy, "the first delete, the on-call's, not the manager's cleanup after it")
	assert.Equal(t, string(runnerpod.RuleOverride), r.DeleteRule)
	assert.Equal(t, "pipeline wedged; retry it", r.DeleteReason)
}

// drainReasonGitLab is the drain case's --reason.
const drainReasonGitLab = "gitlab node pool upgrade"

// drained: the node's drain ends the running job at its deadline.
func drained(t *testing.T, m *manager, _ int64, pod string) {
	t.Helper()
	m.drainedNode = runnerguardDrain(t, m.buildNS, pod, drainReasonGitLab)
}

// endedByDrain: the drain's eviction ended the job, under its override.
func endedByDrain(t *testing.T, m *manager, r death.Record) {
	t.Helper()
	assert.True(t, r.Deleted, "the eviction ended the container")
	assert.NotEmpty(t, r.DeletedBy, "the record names who drained")
	assert.NotEqual(t, m.username, r.DeletedBy, "not the manager's cleanup after it")
	assert.Equal(t, string(runnerpod.RuleOverride), r.DeleteRule, "the drain ends a job by the override")
	assert.Contains(t, r.DeleteReason, drainReason(drainReasonGitLab, m.drainedNode))
	assert.Contains(t, r.ClassBasis, "the node was cordoned (a drain)")
}

func orNone(n *int64) string {
	if n == nil {
		return "none"
	}
	return strconv.FormatInt(*n, 10)
}
