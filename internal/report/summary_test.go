package report

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

var t0 = time.Date(2026, 11, 1, 11, 12, 0, 0, time.UTC)

func at(d time.Duration) *metav1.Time { return &metav1.Time{Time: t0.Add(d)} }

func TestWhySaysWhoseMemoryItShowsAndWhenTheOOMCame(t *testing.T) {
	r := death.Record{Namespace: "ci", DeathRecord: v1alpha1.DeathRecord{Pod: "r", UID: "u", Preset: "arc-scale-set", Container: "runner",
		ExitCode: ptr.To(int32(137)), Signal: 9, Reason: "OOMKilled", Class: string(death.CgroupOOM), StartedAt: at(0), FinishedAt: at(39 * time.Second),
		Vitals: &v1alpha1.Vitals{Cgroup: "v1", Scope: death.ScopeContainer,
			Memory: v1alpha1.Memory{Peak: ptr.To(int64(96 << 20)), Limit: ptr.To(int64(96 << 20)), OOMKill: 1, OOMKillAt: at(39 * time.Second)},
			Pod:    &v1alpha1.Memory{Peak: ptr.To(int64(106524 << 10)), Limit: ptr.To(int64(128 << 20))}},
		Job:     &v1alpha1.Job{ID: "7311", Run: "900123", Project: "acme/app", Source: "EphemeralRunner/r"},
		Message: "[RUNNER 2026-11-01 11:12:38Z INFO JobDispatcher] running\nKilled", OOMConfirmed: ptr.To(true),
	}}
	got := Summary(r)
	assert.Contains(t, got, `  memory of the runner container "runner" (its own cgroup, v1): peak 96Mi of 96Mi limit, oom 0, oom_kill 1, first OOM kill seen at 2026-11-01T11:12:39Z`)
	assert.Contains(t, got, "  memory of the pod (every container and the vitals sidecar): peak 106524Ki of 128Mi limit, oom 0, oom_kill 0\n")
	assert.Contains(t, got, "  job 7311 (run 900123, project acme/app), from EphemeralRunner/r\n")
	assert.Contains(t, got, "  last words (the runner's termination message; written by the container, not evidence):\n    | [RUNNER 2026-11-01 11:12:38Z INFO JobDispatcher] running\n    | Killed\n")
	assert.Contains(t, got, "  the vitals confirm an OOM kill\n")
}

func TestWhySaysAJobEndedByItsOwnerRanUntilTheDeleteAndTheExitCodeIsTheOwners(t *testing.T) {
	r := death.Record{Namespace: "ci", DeathRecord: v1alpha1.DeathRecord{Pod: "b", UID: "u", Preset: "gitlab", Container: "build",
		ExitCode: ptr.To(int32(137)), Signal: 9, Reason: "Error", Class: string(death.JobEnded), StartedAt: at(0), FinishedAt: at(62 * time.Second),
		Deleted: true, DeletedAt: at(32 * time.Second), DeletedBy: "system:serviceaccount:gitlab:gitlab-runner", DeleteRule: string(runnerpod.RuleJobOwner),
		Vitals: &v1alpha1.Vitals{Cgroup: "v2", Scope: death.ScopePod, Memory: v1alpha1.Memory{Peak: ptr.To(int64(1 << 20))}},
	}}
	got := Summary(r)
	assert.Contains(t, got, "  the job ran 2026-11-01T11:12:00Z to 2026-11-01T11:12:32Z (32s), when its owner deleted the pod to end it\n")
	assert.Contains(t, got, "  exit code 137 is the owner's stop of the container at the end, not the job's result\n")
	assert.NotContains(t, got, "ran 2026-11-01T11:12:00Z to 2026-11-01T11:13:02Z", "not the grace period's end")
	assert.Contains(t, got, "the runner's own cgroup was not seen")
}

func TestWhySaysWhyAnOOMStandsWhereV1CountedNoKill(t *testing.T) {
	cases := []struct {
		name, watch string
		want        []string
	}{
		{name: "a sidecar that said nothing of its watch is told the poll's race and the remedy", want: []string{
			"the kubelet's reason OOMKilled decides the class", "the runtime can remove before the sidecar reads it", "with inject.vitals.oomNotify"}},
		{name: "a polling sidecar says so", watch: "polled", want: []string{
			"the runtime can remove before the sidecar reads it", "  OOM kills watched by a poll of the counters"}},
		{name: "a notified sidecar that counted no kill does not blame the poll", watch: "notified", want: []string{
			"though the kernel's OOM notification was registered", "the kubelet's reason OOMKilled decides the class",
			"  OOM kills watched by the kernel's OOM notification (every kill counted)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := death.Record{DeathRecord: v1alpha1.DeathRecord{Class: string(death.CgroupOOM), Reason: "OOMKilled",
				Vitals: &v1alpha1.Vitals{Cgroup: "v1", Scope: death.ScopePod, OOMWatch: tc.watch}}}
			got := Summary(r)
			for _, w := range tc.want {
				assert.Contains(t, got, w)
			}
			if tc.watch == "notified" {
				assert.NotContains(t, got, "the runtime can remove before the sidecar reads it")
			}
		})
	}
}

func TestWhySaysANotifiedV1KillWasCounted(t *testing.T) {
	r := death.Record{DeathRecord: v1alpha1.DeathRecord{Class: string(death.CgroupOOM), Reason: "OOMKilled", OOMConfirmed: ptr.To(true),
		Vitals: &v1alpha1.Vitals{Cgroup: "v1", Scope: death.ScopePod, OOMWatch: "notified", Memory: v1alpha1.Memory{OOM: 1, OOMKill: 1}}}}
	got := Summary(r)
	assert.Contains(t, got, "  the vitals confirm an OOM kill\n  OOM kills watched by the kernel's OOM notification (every kill counted)\n")
}

func TestWhyGivesTheClusterAndNodeAccount(t *testing.T) {
	r := death.Record{DeathRecord: v1alpha1.DeathRecord{Node: "n1", Class: string(death.NodeDisrupted), ClassBasis: "the pod was deleted while the node was cordoned (a drain)",
		Disruption: &v1alpha1.Disruption{Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"},
		NodeState:  &v1alpha1.NodeState{Taints: []string{"node.kubernetes.io/unschedulable"}}}}
	got := Summary(r)
	assert.Contains(t, got, "  why this class: the pod was deleted while the node was cordoned (a drain)\n")
	assert.Contains(t, got, "  disruption: EvictionByEvictionAPI (Eviction API: evicting)\n")
	assert.Contains(t, got, "  node n1 when recorded: taints node.kubernetes.io/unschedulable\n")
}

func TestWhySaysAContainerTheKubeletLostLeftNoLastWords(t *testing.T) {
	r := death.Record{DeathRecord: v1alpha1.DeathRecord{Container: "runner", Class: string(death.StorageEviction), PodReason: "Evicted",
		ExitCode: ptr.To(int32(137)), Signal: 9, Reason: death.ReasonContainerStatusUnknown, Restarts: 1}}
	got := Summary(r)
	assert.Contains(t, got, "  the kubelet no longer found the container when it reported its end")
	assert.Contains(t, got, "the exit code is its placeholder")
	assert.NotContains(t, got, "last words (")
}

// An ARC runner's life includes its wait for a job: `why` says so rather
// than calling all of it the job; an idle runner's removal says it never
// had one.
func TestWhyTellsAnARCRunnersLifeFromItsJob(t *testing.T) {
	base := v1alpha1.DeathRecord{Pod: "r", UID: "u", Preset: "arc-scale-set", Container: "runner",
		ExitCode: ptr.To(int32(143)), Signal: 15, Reason: "Error", StartedAt: at(0), FinishedAt: at(97 * time.Second),
		Deleted: true, DeletedAt: at(95 * time.Second), DeletedBy: "system:serviceaccount:arc-systems:arc-gha-rs-controller"}
	over := base
	over.Class, over.DeleteRule = string(death.JobEnded), string(runnerpod.RuleJobOver)
	got := Summary(death.Record{Namespace: "ci", DeathRecord: over})
	assert.Contains(t, got, "  the runner ran 2026-11-01T11:12:00Z to 2026-11-01T11:13:35Z (95s), its wait for the job included, when system:serviceaccount:arc-systems:arc-gha-rs-controller deleted the pod after the job\n")
	assert.NotContains(t, got, "the job ran")

	over.JobStartedAt = at(60 * time.Second)
	got = Summary(death.Record{Namespace: "ci", DeathRecord: over})
	assert.Contains(t, got, "  the job ran 2026-11-01T11:13:00Z to 2026-11-01T11:13:35Z (35s), when system:serviceaccount:arc-systems:arc-gha-rs-controller deleted the pod after it\n")
	assert.Contains(t, got, "  the runner had waited for it since 2026-11-01T11:12:00Z (60s)\n")

	idle := base
	idle.Class, idle.DeleteRule = string(death.IdleRemoved), string(runnerpod.RuleIdle)
	got = Summary(death.Record{Namespace: "ci", DeathRecord: idle})
	assert.Contains(t, got, "  the runner waited 2026-11-01T11:12:00Z to 2026-11-01T11:13:35Z (95s) and never had a job, when its fleet deleted the pod\n")
	assert.Contains(t, got, "  exit code 143 is the fleet's stop of the idle container\n")
	assert.Contains(t, got, "  it had no job when system:serviceaccount:arc-systems:arc-gha-rs-controller deleted its pod\n")
	assert.NotContains(t, got, "the job ran")
}

// A GitLab job's end by its manager is the same delete for a success, a
// failure and a cancel: `why` says the cluster does not know which (the
// record's class basis, death.OutcomeUnknown), and marks the last words the build container wrote after the delete began.
func TestWhySaysAJobsOutcomeIsUnknownToTheClusterAndMarksLateLastWords(t *testing.T) {
	r := death.Record{Namespace: "ci", DeathRecord: v1alpha1.DeathRecord{Pod: "b", UID: "u", Preset: "gitlab", Container: "build",
		ExitCode: ptr.To(int32(137)), Signal: 9, Reason: "Error", Class: string(death.JobEnded), StartedAt: at(0), FinishedAt: at(62 * time.Second),
		Deleted: true, DeletedAt: at(32 * time.Second), DeletedBy: "glr", DeleteRule: string(runnerpod.RuleJobOwner), Message: "step 3\nstep 4",
		ClassBasis: death.OutcomeUnknown}}
	got := Summary(r)
	assert.Contains(t, got, "  why this class: the job's owner deleted the pod while its container still ran, as it does after a success, a failure and a cancel alike: the job's outcome is unknown to the cluster")
	assert.NotContains(t, got, "normal end")
	assert.Contains(t, got, "  (the container ran on 30s after its pod's deletion began: lines near the end may come after the job's end)\n")

	r.Class, r.ClassBasis = string(death.ProcessOOM), ""
	assert.Contains(t, Summary(r), "the kernel OOM-killed a process of the job")
	assert.Contains(t, Summary(r), "  its pod's deletion began at 2026-11-01T11:12:32Z, 30s before that: the job ended then")
	assert.NotContains(t, Summary(r), "outcome is unknown", "said of a job's end only")
}

// A build container the kernel killed at its limit ended the job with it:
// the manager's delete came at the kill or after, and `why` ends the job
// at the container's end, not at a deletion.
func TestWhyEndsAJobAtTheOOMKillThatEndedItsContainer(t *testing.T) {
	r := death.Record{Namespace: "ci", DeathRecord: v1alpha1.DeathRecord{Pod: "b", UID: "u", Preset: "gitlab", Container: "build",
		ExitCode: ptr.To(int32(137)), Signal: 9, Reason: "OOMKilled", Class: string(death.CgroupOOM),
		JobStartedAt: at(-3 * time.Second), StartedAt: at(0), FinishedAt: at(7 * time.Second),
		DeletedBy: "glr", DeleteRule: string(runnerpod.RuleJobOwner)}}
	got := Summary(r)
	assert.Contains(t, got, "  ran 2026-11-01T11:12:00Z to 2026-11-01T11:12:07Z (7s)\n")
	assert.Contains(t, got, "  the job ran 2026-11-01T11:11:57Z to 2026-11-01T11:12:07Z (10s), and ended with the container, at the OOM kill\n")
	assert.Contains(t, got, "  pod deleted afterwards by glr\n")
	assert.NotContains(t, got, "deletion began", "no deletion ended it")
	assert.NotContains(t, got, "ended by its pod's deletion")
}

func TestWhyAndDeathsSayWhetherAndWhereADeathWasReported(t *testing.T) {
	r := death.Record{Namespace: "ci", DeathRecord: v1alpha1.DeathRecord{Pod: "r", Class: string(death.CgroupOOM)},
		Reports: []v1alpha1.Report{{Destination: "github", Phase: "Sent", Attempts: 1, Where: "https://github.com/acme/app/runs/1"},
			{Destination: "sink/alerts", Phase: "Retrying", Attempts: 2, Message: "HTTP 503: down"}}}
	got := Summary(r)
	assert.Contains(t, got, "  reported to github: Sent, https://github.com/acme/app/runs/1\n")
	assert.Contains(t, got, "  reported to sink/alerts: Retrying (2 attempts): HTTP 503: down\n")
	assert.Contains(t, RecordsTable([]death.Record{r}, true, 1), "github Sent https://github.com/acme/app/runs/1,sink/alerts Retrying")
	assert.NotContains(t, Facts(r), "reported to", "what is sent never says what was sent")
}

// What a job wrote reaches the operator's terminal as characters to read:
// a build log's colours, a title-setting sequence, a carriage return and a
// right-to-left override in its last words, its pod's message or the job's
// name are escaped, in why, deaths' table and the Event's note alike.
func TestNothingAJobWroteReachesATerminalAsAControlSequence(t *testing.T) {
	r := death.Record{Namespace: "ci", DeathRecord: v1alpha1.DeathRecord{Pod: "r", Preset: "gitlab", Container: "build",
		Class: string(death.ErrorExit), ExitCode: ptr.To(int32(1)), PodReason: "Evicted", PodMessage: "disk\x1b]0;owned\x07",
		Job:     &v1alpha1.Job{ID: "9", Name: "test\u202egnp.exe"},
		Message: "\x1b[31mFAILED\x1b[0m\rPASSED\nnext line",
	}}
	for what, got := range map[string]string{"why": Summary(r), "deaths": RecordsTable([]death.Record{r}, true, 1), "the Event": r.Note()} {
		assert.NotContains(t, got, "\x1b", what)
		assert.NotContains(t, got, "\r", what)
		assert.NotContains(t, got, "\u202e", what)
	}
	got := Summary(r)
	assert.Contains(t, got, `    | \x1b[31mFAILED\x1b[0m\rPASSED`+"\n    | next line\n", "last words keep their lines")
	assert.Contains(t, got, `pod message: disk\x1b]0;owned\a`)
	assert.Contains(t, got, `test\u202egnp.exe`)
}
