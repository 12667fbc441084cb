//go:build e2e

package api

import (
	"context"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/fleet/gitlab"
	"github.com/runnerguard/runnerguard/internal/notify"
	"github.com/runnerguard/runnerguard/internal/notify/notifytest"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// reportRun is the workflow run of the ARC deaths below.
const reportRun = int64(11802293411)

// killing is one way a runner dies: how its pod is built, how it dies
// (the status written without waiting for a leader: some die while none
// leads), and what its report must say.
type killing struct {
	name, class, title string
	build              func(p *corev1.Pod)
	end                func(t *testing.T, pod *corev1.Pod, runner string, w *podtest.Wrapper)
}

func killings() []killing {
	return []killing{
		{name: "oom", class: string(death.CgroupOOM), title: "Runner OOM-killed",
			end: func(t *testing.T, pod *corev1.Pod, runner string, w *podtest.Wrapper) {
				writeStatus(t, pod, w.Terminated(runner, 137, "OOMKilled").Obj().Status)
			}},
		{name: "override", class: string(death.DeletedRunning), title: "Job ended on purpose: its runner's pod was deleted with the override, which the cluster's operators hold",
			build: func(p *corev1.Pod) { p.Annotations[runnerpod.AllowDelete] = "stuck node" },
			end: func(t *testing.T, pod *corev1.Pod, _ string, _ *podtest.Wrapper) {
				require.NoError(t, deletePod(as(t, reaper), pod, client.GracePeriodSeconds(0)))
			}},
		{name: "nodelost", class: string(death.NodeLost), title: "Runner's node was lost",
			end: func(t *testing.T, pod *corev1.Pod, runner string, w *podtest.Wrapper) {
				writeStatus(t, pod, w.Terminated(runner, 137, "Error").Phase(corev1.PodFailed).Reason("NodeLost").Obj().Status)
			}},
		{name: "probe", class: string(death.ProbeKill), title: "Runner killed for failing its liveness probe",
			build: func(p *corev1.Pod) {
				p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
			},
			end: func(t *testing.T, pod *corev1.Pod, runner string, w *podtest.Wrapper) {
				writeStatus(t, pod, w.Terminated(runner, 137, "Error").Phase(corev1.PodFailed).Obj().Status)
			}},
	}
}

// arcJobRunner is a busy ARC runner's pod, named as ARC names it (for its
// EphemeralRunner) and created by ARC's controller, whose EphemeralRunner
// names job id of run reportRun.
func arcJobRunner(t *testing.T, ns, name, id string, build func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	er := apitest.EphemeralRunner(ns, name)
	require.NoError(t, admin.Create(ctx, er))
	for field, v := range map[string]any{"phase": "Running", "jobId": id, "workflowRunId": reportRun, "jobRepositoryName": "acme/app", "jobDisplayName": "build (" + name + ")"} {
		require.NoError(t, unstructured.SetNestedField(er.Object, v, "status", field))
	}
	require.NoError(t, admin.Status().Update(ctx, er))
	p := podtest.ARCScaleSet(ns, name).RunningSince("runner", time.Now().Add(-time.Minute)).Obj()
	p.OwnerReferences[0].UID = er.GetUID()
	p.Annotations = map[string]string{}
	if build != nil {
		build(p)
	}
	return create(t, as(t, arcController), p)
}

// gitlabRunner is a running GitLab build pod its manager created for job id
// of project 42.
func gitlabRunner(t *testing.T, ns, name, id string, build func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	p := podtest.GitLab(ns, name).RunningSince("build", time.Now().Add(-time.Minute)).
		Annotate(gitlab.JobIDAnnotation, id).Label(gitlab.ProjectIDLabel, "42").Obj()
	if build != nil {
		build(p)
	}
	return create(t, as(t, ownerPrincipal), p)
}

func isPost(suffix string) func(*http.Request) bool {
	return func(r *http.Request) bool { return r.Method == http.MethodPost && strings.Contains(r.URL.Path, suffix) }
}

// TestEachDeathIsReportedOnceWithItsFactsAcrossALeaderKill kills the
// leader while GitHub and GitLab each hold a report that arrived but whose
// answer it never read, and while the other deaths are not yet recorded:
// the next leader records them, finds the two that arrived, and tells each
// death once.
func TestEachDeathIsReportedOnceWithItsFactsAcrossALeaderKill(t *testing.T) {
	ns := newNamespace(t, nil)
	r := startReporting(t, ns)
	ks := killings()
	arc, gl := map[string]*corev1.Pod{}, map[string]*corev1.Pod{}
	for i, k := range ks {
		arc[k.name] = arcJobRunner(t, ns, "arc-"+k.name, "3188550281"+string(rune('0'+i)), k.build)
		id := "700" + string(rune('1'+i))
		r.gl.Jobs = append(r.gl.Jobs, notifytest.Job{Project: "42", ID: id, SHA: reportSHA, Ref: "main", Pipeline: 9})
		gl[k.name] = gitlabRunner(t, ns, "runner-kill-project-42-concurrent-"+k.name, id, k.build)
	}

	// A runner whose job went well and which then exited, as ARC's do.
	ended := arcJobRunner(t, ns, "arc-ended", "31885502899", nil)

	// The first deaths: their reports arrive, and the leader dies before
	// it hears so.
	ghArrived, ghRelease := r.gh.Hold(isPost("/check-runs"))
	glArrived, glRelease := r.gl.Hold(isPost("/statuses/"))
	defer ghRelease()
	defer glRelease()
	ks[0].end(t, arc[ks[0].name], "runner", podtest.Runner(ns, arc[ks[0].name].Name))
	ks[0].end(t, gl[ks[0].name], "build", podtest.GitLab(ns, gl[ks[0].name].Name))
	for _, ch := range []<-chan struct{}{ghArrived, glArrived} {
		select {
		case <-ch:
		case <-time.After(time.Minute):
			t.Fatal("the first reports never arrived")
		}
	}
	require.NoError(t, syscall.Kill(server.Pid(), syscall.SIGKILL))
	server.Stop() // reaps it
	ghRelease()
	glRelease()
	require.NoError(t, server.Start(context.Background()), "a new leader, once the dead one's lease expires")

	// The other deaths, while the dead leader's lease still holds.
	for _, k := range ks[1:] {
		k.end(t, arc[k.name], "runner", podtest.Runner(ns, arc[k.name].Name))
		k.end(t, gl[k.name], "build", podtest.GitLab(ns, gl[k.name].Name))
	}
	writeStatus(t, ended, podtest.Runner(ns, ended.Name).Terminated("runner", 0, "Completed").Phase(corev1.PodSucceeded).Obj().Status)
	require.False(t, leading(t, server), "the other deaths came while none led: the next leader records them")

	for i, k := range ks {
		t.Run(k.name, func(t *testing.T) {
			gh := reportOf(t, arc[k.name], notify.GitHub)
			assert.Equal(t, notify.PhaseSent, gh.Phase, gh.Message)
			assert.NotEmpty(t, gh.Where)
			lab := reportOf(t, gl[k.name], notify.GitLab)
			assert.Equal(t, notify.PhaseSent, lab.Phase, lab.Message)
			assert.Equal(t, r.gl.URL+"/42/-/jobs/700"+string(rune('1'+i)), lab.Where)
			if i == 0 {
				assert.Equal(t, int32(2), gh.Attempts, "the in-doubt attempt, then the one that found it")
				assert.Equal(t, int32(2), lab.Attempts, "the in-doubt attempt, then the one that found it")
			}
			rec := deathsOf(t, arc[k.name])[0]
			assert.Equal(t, k.class, rec.Class)
			assert.Contains(t, runDeaths(t, "-n", ns, "--job", rec.Job.ID, "-o", "wide"), "github Sent "+gh.Where, "deaths says where it was told")
			assert.Contains(t, runDeaths(t, "-n", ns, "--job", "700"+string(rune('1'+i)), "-o", "wide"), "gitlab Sent "+lab.Where)

			var runs []notifytest.CheckRun
			for _, cr := range r.gh.CheckRuns() {
				if cr.Name == "runnerguard: build (arc-"+k.name+")" {
					runs = append(runs, cr)
				}
			}
			require.Len(t, runs, 1, "one check run for the death")
			cr := runs[0]
			assert.Equal(t, "acme/app", cr.Repository)
			assert.Equal(t, reportSHA, cr.HeadSHA)
			assert.Equal(t, "completed", cr.Status)
			assert.Equal(t, notify.Conclusion(rec), cr.Conclusion)
			assert.Equal(t, k.title, cr.Output.Title)
			assert.Contains(t, cr.Output.Summary, "died: "+k.class)
			assert.Contains(t, cr.Output.Summary, "pod "+ns+"/arc-"+k.name)
			assert.Contains(t, cr.Output.Summary, "`kubectl runnerguard deaths -n "+ns+" --job "+rec.Job.ID+"`")
			if k.class == string(death.DeletedRunning) {
				assert.Contains(t, cr.Output.Summary, "requested by "+notify.Withheld+" (allowed: override)")
				assert.NotContains(t, cr.Output.Summary, reaper, "no report names who deleted the pod by default")
			}

			var sts []notifytest.Status
			for _, s := range r.gl.Statuses() {
				if s.Name == "runnerguard: job 700"+string(rune('1'+i)) {
					sts = append(sts, s)
				}
			}
			require.Len(t, sts, 1, "one commit status for the death")
			assert.Equal(t, notifytest.Status{Project: "42", SHA: reportSHA, State: string(notify.State(rec)), Name: sts[0].Name, Ref: "main",
				TargetURL: lab.Where, Description: k.title, PipelineID: 9}, sts[0])
		})
	}
	assert.Contains(t, []string{string(death.CleanExit), string(death.JobEnded)}, oneDeath(t, ended).Class, "a normal end")
	assert.Empty(t, deathsOf(t, ended)[0].Reports, "a runner's clean end is told nowhere")
	assert.Len(t, r.gh.CheckRuns(), len(ks), "and no check run for it")
	assert.Len(t, r.gl.Statuses(), len(ks))
	ids := map[any]int{}
	for _, e := range r.sink.Events() {
		ids[e["id"]]++
	}
	assert.Len(t, ids, 2*len(ks), "each death to the sink")
	assert.Len(t, r.sink.Events(), 2*len(ks), "and once")
	assert.Empty(t, append(append(r.gh.Errors(), r.gl.Errors()...), r.sink.Errors()...), "every request had the published shape")
}
