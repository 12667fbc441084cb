//go:build e2e

package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/fleet/gitlab"
	"github.com/runnerguard/runnerguard/internal/notify"
	"github.com/runnerguard/runnerguard/internal/notify/notifytest"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

const reportSHA = "89abcdef0123456789abcdef0123456789abcdef"

// reporting runs the suite's leader with reports to fakes of GitHub,
// GitLab and a sink for the namespace ns, its replica stopped so that each
// restart is a new leader; the suite's config comes back after t.
type reporting struct {
	gh   *notifytest.GitHub
	gl   *notifytest.GitLab
	sink *notifytest.Sink
	cfg  config.Config
}

func startReporting(t *testing.T, ns string) *reporting {
	t.Helper()
	ctx := context.Background()
	r := &reporting{
		gh: notifytest.NewGitHub(101, 202, map[string]string{"acme/app/11802293411": reportSHA}),
		gl: notifytest.NewGitLab("glpat-e2e", notifytest.Job{Project: "42", ID: "5521", SHA: reportSHA, Ref: "main", Pipeline: 9},
			notifytest.Job{Project: "42", ID: "5522", SHA: reportSHA, Ref: "main", Pipeline: 9}, notifytest.Job{Project: "42", ID: "5523", SHA: reportSHA, Ref: "main", Pipeline: 9},
			notifytest.Job{Project: "42", ID: "5524", SHA: reportSHA, Ref: "main", Pipeline: 9},
			notifytest.Job{Project: "42", ID: "6001", SHA: reportSHA, Ref: "main", Pipeline: 9}, notifytest.Job{Project: "42", ID: "6002", SHA: reportSHA, Ref: "main", Pipeline: 9},
			notifytest.Job{Project: "42", ID: "6003", SHA: reportSHA, Ref: "main", Pipeline: 9}),
		sink: notifytest.NewSink([]byte("e2e-hmac-key")),
	}
	t.Cleanup(func() { r.gh.Close(); r.gl.Close(); r.sink.Close() })
	for name, data := range map[string]map[string][]byte{
		"reports-github": {notify.KeyPrivateKey: r.gh.Key}, "reports-gitlab": {notify.KeyToken: []byte("glpat-e2e")}, "reports-sink": {notify.KeyHMAC: []byte("e2e-hmac-key")},
	} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: apitest.ReleaseNamespace, Name: name}, Data: data}
		require.NoError(t, client.IgnoreAlreadyExists(admin.Create(ctx, s)))
		require.NoError(t, admin.Update(ctx, s))
	}
	r.cfg = suiteCfg
	r.cfg.Reports = config.Reports{Namespaces: []string{ns}, SecretNamespace: apitest.ReleaseNamespace, MaxAttempts: 2, MaxAge: metav1.Duration{Duration: time.Hour},
		GitHub: &config.GitHub{URL: r.gh.URL(), AppID: 101, InstallationID: 202, Secret: "reports-github", Controllers: []string{arcController}},
		GitLab: &config.GitLab{URL: r.gl.URL, Secret: "reports-gitlab", Managers: []string{ownerPrincipal}},
		Sinks:  []config.Sink{{Name: "alerts", URL: r.sink.URL, Secret: "reports-sink"}}}
	replica.Stop()
	require.NoError(t, server.Reconfigure(ctx, r.cfg))
	t.Cleanup(func() {
		require.NoError(t, server.Reconfigure(ctx, suiteCfg), "restoring the suite's config")
		require.NoError(t, replica.Start(ctx), "restarting its replica")
	})
	return r
}

// restart stops the leader and starts a new one.
func (r *reporting) restart(t *testing.T) {
	t.Helper()
	require.NoError(t, server.Reconfigure(context.Background(), r.cfg))
}

// reportOf waits for the record of pod to carry destination's report in
// a final phase.
func reportOf(t *testing.T, pod *corev1.Pod, destination string) v1alpha1.Report {
	t.Helper()
	var got v1alpha1.Report
	var seen string
	ok := assert.Eventually(t, func() bool {
		recs := deathsOf(t, pod)
		seen = fmt.Sprintf("%d records", len(recs))
		if len(recs) == 1 {
			seen = fmt.Sprintf("class %s (%s), deleted by %s, reports %+v", recs[0].Class, recs[0].ClassBasis, recs[0].DeletedBy, recs[0].Reports)
		}
		if len(recs) != 1 {
			return false
		}
		for _, rep := range recs[0].Reports {
			if rep.Destination == destination && (rep.Phase == notify.PhaseSent || rep.Phase == notify.PhaseFailed || rep.Phase == notify.PhaseSkipped) {
				got = rep
				return true
			}
		}
		return false
	}, time.Minute, 200*time.Millisecond, "the report of "+pod.Name+" to "+destination)
	if !ok {
		t.Fatalf("the report of %s to %s: the record: %s", pod.Name, destination, seen)
	}
	return got
}

// runningJob is an ARC runner's pod whose EphemeralRunner, created here,
// runs job of the fake GitHub's workflow run in acme/app; ARC's controller
// creates the pod.
func runningJob(t *testing.T, ns, name, job, display string) *podtest.Wrapper {
	t.Helper()
	ctx := context.Background()
	er := apitest.EphemeralRunner(ns, name)
	require.NoError(t, admin.Create(ctx, er))
	for field, v := range map[string]any{"phase": "Running", "jobId": job, "workflowRunId": int64(11802293411), "jobRepositoryName": "acme/app", "jobDisplayName": display} {
		require.NoError(t, unstructured.SetNestedField(er.Object, v, "status", field))
	}
	require.NoError(t, admin.Status().Update(ctx, er))
	w := podtest.ARCScaleSet(ns, name).RunningSince("runner", time.Now().Add(-time.Minute))
	w.OwnerReferences[0].UID = er.GetUID()
	return w
}

func gitlabBuild(t *testing.T, c client.Client, ns, name, job, project string) *corev1.Pod {
	w := podtest.GitLab(ns, name).RunningSince("build", time.Now().Add(-time.Minute)).
		Annotate(gitlab.JobIDAnnotation, job).Label(gitlab.ProjectIDLabel, project)
	return create(t, c, w.Obj())
}

func TestDeathsAreReportedOnceWhereTheFleetSaysAcrossALeaderRestart(t *testing.T) {
	ns := newNamespace(t, nil)
	r := startReporting(t, ns)
	manager := as(t, ownerPrincipal)

	// An ARC runner OOM-killed: a check run on the workflow run's commit.
	arc := create(t, as(t, arcController), runningJob(t, ns, "arc-rep1", "31885502817", "build (linux)").Obj())
	st := podtest.Runner(ns, arc.Name).Terminated("runner", 137, "OOMKilled").Obj().Status
	st.ContainerStatuses[0].State.Terminated.Message = "secret=do-not-send"
	setStatus(t, arc, st)
	require.NoError(t, deletePod(as(t, "system:serviceaccount:arc-systems:arc-gha-rs-controller"), arc))

	// A GitLab job OOM-killed, in a build pod its manager created.
	oom := gitlabBuild(t, manager, ns, "runner-rep-project-42-concurrent-0", "5521", "42")
	setStatus(t, oom, podtest.GitLab(ns, oom.Name).Terminated("build", 137, "OOMKilled").Obj().Status)

	gh := reportOf(t, arc, notify.GitHub)
	assert.Equal(t, notify.PhaseSent, gh.Phase, gh.Message)
	gl := reportOf(t, oom, notify.GitLab)
	assert.Equal(t, notify.PhaseSent, gl.Phase, gl.Message)
	reportOf(t, oom, "sink/alerts")

	// A new leader, and a later death it tells after it has seen the first.
	r.restart(t)
	next := gitlabBuild(t, manager, ns, "runner-rep-project-42-concurrent-1", "5522", "42")
	setStatus(t, next, podtest.GitLab(ns, next.Name).Terminated("build", 137, "OOMKilled").Obj().Status)
	assert.Equal(t, notify.PhaseSent, reportOf(t, next, notify.GitLab).Phase)
	reportOf(t, next, "sink/alerts")

	runs := r.gh.CheckRuns()
	require.Len(t, runs, 1, "one check run across the leaders")
	assert.Equal(t, "acme/app", runs[0].Repository)
	assert.Equal(t, reportSHA, runs[0].HeadSHA)
	assert.Equal(t, "Runner OOM-killed", runs[0].Output.Title)
	assert.Contains(t, runs[0].Output.Summary, "kubectl runnerguard deaths -n "+ns+" --job 31885502817")
	assert.NotContains(t, runs[0].Output.Summary, "do-not-send", "no last words by default")
	statuses := r.gl.Statuses()
	require.Len(t, statuses, 2, "one status per job across the leaders")
	assert.Equal(t, "runnerguard: job 5521", statuses[0].Name)
	assert.Equal(t, "failed", statuses[0].State)
	assert.Equal(t, int64(9), statuses[0].PipelineID)
	assert.Len(t, r.sink.Events(), 3, "each death once to the sink")
	assert.Empty(t, append(append(r.gh.Errors(), r.gl.Errors()...), r.sink.Errors()...), "every request had the published shape")

	// The job's normal end: its manager deletes the running build pod.
	ended := gitlabBuild(t, manager, ns, "runner-rep-project-42-concurrent-2", "5523", "42")
	require.NoError(t, deletePod(manager, ended))
	// The build shell ignores SIGTERM: the kubelet kills it after the grace.
	st = podtest.GitLab(ns, ended.Name).Terminated("build", 137, "Error").Obj().Status
	st.ContainerStatuses[0].State.Terminated.StartedAt.Time = time.Now().Add(-time.Minute)
	st.ContainerStatuses[0].State.Terminated.FinishedAt.Time = time.Now()
	setStatus(t, ended, st)
	assert.Equal(t, string(death.JobEnded), oneDeath(t, ended).Class)
	// A death after it is told; the job's end never is.
	after := gitlabBuild(t, manager, ns, "runner-rep-project-42-concurrent-3", "5524", "42")
	setStatus(t, after, podtest.GitLab(ns, after.Name).Terminated("build", 137, "OOMKilled").Obj().Status)
	reportOf(t, after, "sink/alerts")
	assert.Equal(t, notify.PhaseSent, reportOf(t, after, notify.GitLab).Phase)
	assert.Empty(t, deathsOf(t, ended)[0].Reports, "a job's normal end is told nowhere")
	assert.Len(t, r.gl.Statuses(), 3)
	assert.Len(t, r.sink.Events(), 4)
	for _, s := range r.gl.Statuses() {
		assert.NotEqual(t, "runnerguard: job 5523", s.Name)
	}
}

func TestAnEditorCannotSendAReportToAnotherProject(t *testing.T) {
	ns := newNamespace(t, nil)
	r := startReporting(t, ns)
	editor := as(t, reaper)

	// Rewriting a build pod's project after its creation is refused.
	pod := gitlabBuild(t, as(t, ownerPrincipal), ns, "runner-ed-project-42-concurrent-0", "5521", "42")
	err := editor.Patch(context.Background(), pod, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"`+gitlab.ProjectIDLabel+`":"7"}}}`)))
	require.Error(t, err, "the policy keeps the job's marks")
	assert.Contains(t, err.Error(), "written when the pod is created and never change")

	// Nor the job it names, nor the record of who created the pod, by a
	// patch or through the status subresource.
	for _, patch := range []string{
		`{"metadata":{"annotations":{"` + gitlab.JobIDAnnotation + `":"1"}}}`,
		`{"metadata":{"labels":{"` + gitlab.ProjectIDLabel + `":null}}}`,
	} {
		err := editor.Patch(context.Background(), pod, client.RawPatch("application/merge-patch+json", []byte(patch)))
		require.Error(t, err, patch)
		assert.Contains(t, err.Error(), "written when the pod is created and never change", patch)
		err = editor.Status().Patch(context.Background(), pod, client.RawPatch("application/merge-patch+json", []byte(patch)))
		require.Error(t, err, "status: "+patch)
	}
	err = editor.Patch(context.Background(), pod, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"`+runnerpod.CreatedBy+`":"`+reaper+`"}}}`)))
	require.Error(t, err, "the pod's recorded creator is kept")

	// A pod the editor created naming another project is not told there.
	forged := gitlabBuild(t, editor, ns, "runner-ed-project-7-concurrent-0", "5521", "7")
	setStatus(t, forged, podtest.GitLab(ns, forged.Name).Terminated("build", 137, "OOMKilled").Obj().Status)
	rep := reportOf(t, forged, notify.GitLab)
	assert.Equal(t, notify.PhaseSkipped, rep.Phase)
	assert.Contains(t, rep.Message, "not created by a configured GitLab Runner manager")
	// Nor one claiming, as its creator, the manager it is not.
	claimed := podtest.GitLab(ns, "runner-ed-project-7-concurrent-1").RunningSince("build", time.Now().Add(-time.Minute)).
		Annotate(gitlab.JobIDAnnotation, "5521").Label(gitlab.ProjectIDLabel, "7").Annotate(runnerpod.CreatedBy, ownerPrincipal).Obj()
	claimed = create(t, editor, claimed)
	assert.Equal(t, reaper, claimed.Annotations[runnerpod.CreatedBy], "the injector writes the requester over the claim")
	setStatus(t, claimed, podtest.GitLab(ns, claimed.Name).Terminated("build", 137, "OOMKilled").Obj().Status)
	assert.Equal(t, notify.PhaseSkipped, reportOf(t, claimed, notify.GitLab).Phase)
	assert.Empty(t, r.gl.Statuses(), "GitLab was told nothing")

	// A pod the editor created claiming a busy ARC runner's EphemeralRunner
	// of another repository as its owner (its UID read from the API): the
	// EphemeralRunner stands for another pod (ARC names the pod after it),
	// so the record names no job from it, and nothing is told to that
	// repository.
	er := apitest.EphemeralRunner(ns, "arc-victim")
	require.NoError(t, admin.Create(context.Background(), er))
	for field, v := range map[string]any{"phase": "Running", "jobId": "999", "workflowRunId": reportRun, "jobRepositoryName": "acme/app", "jobDisplayName": "deploy"} {
		require.NoError(t, unstructured.SetNestedField(er.Object, v, "status", field))
	}
	require.NoError(t, admin.Status().Update(context.Background(), er))
	impostor := podtest.ARCScaleSet(ns, "arc-impostor").RunningSince("runner", time.Now().Add(-time.Minute)).Obj()
	impostor.OwnerReferences[0].Name, impostor.OwnerReferences[0].UID, impostor.OwnerReferences[0].BlockOwnerDeletion = "arc-victim", er.GetUID(), nil
	impostor = create(t, editor, impostor)
	setStatus(t, impostor, podtest.Runner(ns, impostor.Name).Terminated("runner", 137, "OOMKilled").Obj().Status)
	rep = reportOf(t, impostor, notify.GitHub)
	assert.Equal(t, notify.PhaseSkipped, rep.Phase)
	assert.Contains(t, rep.Message, "the record names no job")
	assert.Nil(t, deathsOf(t, impostor)[0].Job, "the recorder names no job from another pod's EphemeralRunner")

	// A pod the editor created under a runner's own name while the runner
	// has no pod (between ARC's removal of one and its next), owned by its
	// EphemeralRunner: the record names the runner's job, but the pod is
	// not ARC's controller's, so nothing is told to the job's repository.
	vacated := runningJob(t, ns, "arc-vacated", "31885509777", "build (vacated)").Obj()
	vacated = create(t, editor, vacated)
	setStatus(t, vacated, podtest.Runner(ns, vacated.Name).Terminated("runner", 137, "OOMKilled").Obj().Status)
	rep = reportOf(t, vacated, notify.GitHub)
	assert.Equal(t, notify.PhaseSkipped, rep.Phase)
	assert.Contains(t, rep.Message, "the runner pod was not created by a configured ARC controller (created by "+reaper+")")
	assert.Empty(t, r.gh.CheckRuns(), "GitHub was told nothing")
	assert.Empty(t, append(r.gh.Errors(), r.gl.Errors()...))
}

func TestARefusedReportIsRetriedThenFailedOnTheRecord(t *testing.T) {
	ns := newNamespace(t, nil)
	r := startReporting(t, ns)
	r.gl.Fail = func(req *http.Request) (int, http.Header) {
		if req.Method == http.MethodPost && strings.Contains(req.URL.Path, "/statuses/") {
			return http.StatusServiceUnavailable, nil
		}
		return 0, nil
	}
	pod := gitlabBuild(t, as(t, ownerPrincipal), ns, "runner-fail-project-42-concurrent-0", "5521", "42")
	setStatus(t, pod, podtest.GitLab(ns, pod.Name).Terminated("build", 137, "OOMKilled").Obj().Status)
	rep := reportOf(t, pod, notify.GitLab)
	assert.Equal(t, notify.PhaseFailed, rep.Phase)
	assert.Equal(t, int32(2), rep.Attempts, "retried once, then failed (maxAttempts 2)")
	assert.Contains(t, rep.Message, "HTTP 503")
	assert.Empty(t, r.gl.Statuses())
	// The leader's own counters: each failed attempt, and the failure.
	assert.Equal(t, 2.0, serverCounter(t, server, "runnerguard_report_failures_total", map[string]string{"destination": "gitlab", "status": "5xx"}))
	assert.Equal(t, 1.0, serverCounter(t, server, "runnerguard_reports_total", map[string]string{"destination": "gitlab", "phase": notify.PhaseFailed}))
}

// serverCounter is a counter of the binary's /metrics, summed over the
// series that carry labels.
func serverCounter(t *testing.T, s *apitest.Server, name string, labels map[string]string) float64 {
	t.Helper()
	n, err := s.Counter(name, labels)
	require.NoError(t, err)
	return n
}

// A runner an operator ended on purpose (the override, set before the
// reaper's delete) is told as information on the job's commit: GitHub's
// neutral and GitLab's skipped, which a passing re-run is not held by; and
// no report, on purpose or not, names who deleted the pod, the node or
// the pod's UID by default.
func TestARunnerEndedOnPurposeIsToldAsInformationAndNoReportNamesWhoOrWhere(t *testing.T) {
	ns := newNamespace(t, nil)
	ctx := context.Background()
	r := startReporting(t, ns)

	arc := create(t, as(t, arcController), runningJob(t, ns, "arc-purpose", "31885509001", "deploy (linux)").Annotate(runnerpod.AllowDelete, "kernel patch, INC-4711").Obj())
	build := gitlabBuild(t, as(t, ownerPrincipal), ns, "runner-purpose-project-42-concurrent-0", "6001", "42")
	// An operator sets the override on the running build pod.
	patch := []byte(`{"metadata":{"annotations":{"` + runnerpod.AllowDelete + `":"kernel patch, INC-4711"}}}`)
	require.NoError(t, admin.Patch(ctx, build, client.RawPatch("application/merge-patch+json", patch)))

	for pod, ended := range map[*corev1.Pod]*podtest.Wrapper{
		arc:   podtest.Runner(ns, arc.Name).Terminated("runner", 143, "Error"),
		build: podtest.GitLab(ns, build.Name).Terminated("build", 143, "Error"),
	} {
		require.NoError(t, deletePod(as(t, reaper), pod), "the override lets the reaper delete a busy runner")
		// The runner ends on the deletion's SIGTERM.
		st := ended.Obj().Status
		for i := range st.ContainerStatuses {
			if term := st.ContainerStatuses[i].State.Terminated; term != nil {
				term.StartedAt.Time, term.FinishedAt.Time = time.Now().Add(-time.Minute), time.Now()
			}
		}
		setStatus(t, pod, st)
	}
	assert.Equal(t, notify.PhaseSent, reportOf(t, arc, notify.GitHub).Phase)
	assert.Equal(t, notify.PhaseSent, reportOf(t, build, notify.GitLab).Phase)
	rec := oneDeath(t, arc)
	assert.Equal(t, string(runnerpod.RuleOverride), rec.DeleteRule)

	runs := r.gh.CheckRuns()
	require.Len(t, runs, 1)
	assert.Equal(t, "neutral", runs[0].Conclusion, "GitHub counts neutral as passing")
	assert.Contains(t, runs[0].Output.Title, "Job ended on purpose")
	statuses := r.gl.Statuses()
	require.Len(t, statuses, 1)
	assert.Equal(t, "skipped", statuses[0].State, "a skipped status leaves the pipeline's result to its jobs")
	assert.Contains(t, statuses[0].Description, "Job ended on purpose")
	told := runs[0].Output.Title + runs[0].Output.Summary + statuses[0].Description
	for what, s := range map[string]string{"the deleter": reaper, "the reason": "INC-4711", "the pod's UID": string(arc.UID), "the node": arc.Spec.NodeName} {
		if s != "" {
			assert.NotContains(t, told, s, "a report names not %s", what)
		}
	}
	assert.Contains(t, runs[0].Output.Summary, notify.Withheld)
	assert.Empty(t, append(r.gh.Errors(), r.gl.Errors()...), "every request had the published shape")
}
