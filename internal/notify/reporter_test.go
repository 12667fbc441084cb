package notify_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/notify"
	"github.com/runnerguard/runnerguard/internal/notify/notifytest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

const (
	sha           = "0123456789abcdef0123456789abcdef01234567"
	manager       = "system:serviceaccount:gitlab-runner:gitlab-runner"
	arcController = "system:serviceaccount:arc-systems:arc-gha-rs-controller"
)

type world struct {
	gh   *notifytest.GitHub
	gl   *notifytest.GitLab
	sink *notifytest.Sink
	kube client.Client
	cfg  config.Reports
	now  time.Time
}

func newWorld(t *testing.T, records ...*v1alpha1.RunnerDeath) *world {
	w := &world{now: time.Now().Truncate(time.Second)}
	w.gh = notifytest.NewGitHub(11, 22, map[string]string{"acme/app/900123": sha})
	w.gl = notifytest.NewGitLab("glpat-fake", notifytest.Job{Project: "1234", ID: "42", SHA: sha, Ref: "main", Pipeline: 7})
	w.sink = notifytest.NewSink([]byte("hmac-key"))
	t.Cleanup(func() { w.gh.Close(); w.gl.Close(); w.sink.Close() })
	s := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(s))
	require.NoError(t, corev1.AddToScheme(s))
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "runnerguard", Name: "github-app"}, Data: map[string][]byte{notify.KeyPrivateKey: w.gh.Key}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "runnerguard", Name: "gitlab"}, Data: map[string][]byte{notify.KeyToken: []byte("glpat-fake")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "runnerguard", Name: "sink"}, Data: map[string][]byte{notify.KeyHMAC: []byte("hmac-key")}},
	}
	for _, r := range records {
		objs = append(objs, r)
	}
	w.kube = fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithStatusSubresource(&v1alpha1.RunnerDeath{}).Build()
	w.cfg = config.Reports{Namespaces: []string{"ci"}, SecretNamespace: "runnerguard", MaxAttempts: 3, MaxAge: metav1.Duration{Duration: time.Hour},
		GitHub: &config.GitHub{URL: w.gh.URL(), AppID: 11, InstallationID: 22, Secret: "github-app", Controllers: []string{arcController}},
		GitLab: &config.GitLab{URL: w.gl.URL, Secret: "gitlab", Managers: []string{manager}},
		Sinks:  []config.Sink{{Name: "alerts", URL: w.sink.URL, Secret: "sink"}},
	}
	return w
}

// leader is a new leader's reporter: nothing carried over but the records.
func (w *world) leader() *notify.Reporter {
	now := func() time.Time { return w.now }
	return &notify.Reporter{Reader: w.kube, Client: w.kube, Config: w.cfg, Senders: notify.Senders(w.cfg, w.kube, nil, now), Now: now}
}

func (w *world) reconcile(t *testing.T, r *notify.Reporter, name string) ctrl.Result {
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ci", Name: name}})
	require.NoError(t, err)
	return res
}

func (w *world) status(t *testing.T, name string) v1alpha1.RunnerDeathStatus {
	o := &v1alpha1.RunnerDeath{}
	require.NoError(t, w.kube.Get(context.Background(), client.ObjectKey{Namespace: "ci", Name: name}, o))
	return o.Status
}

func record(name string, r v1alpha1.DeathRecord) *v1alpha1.RunnerDeath {
	return &v1alpha1.RunnerDeath{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: name, UID: types.UID("uid-" + name)}, Record: r}
}

func oom() *v1alpha1.RunnerDeath {
	return record("oom", v1alpha1.DeathRecord{Pod: "runner-x", Preset: "arc-scale-set", Container: "runner", Class: string(death.CgroupOOM), Reason: "OOMKilled",
		ExitCode: ptr.To(int32(137)), Message: "token=s3cret",
		Vitals: &v1alpha1.Vitals{Cgroup: "v2", Scope: death.ScopeContainer, Memory: v1alpha1.Memory{Peak: ptr.To(int64(8482560409)), Limit: ptr.To(int64(8 << 30)), OOMKill: 1}},
		Job:    &v1alpha1.Job{ID: "7311", Run: "900123", Project: "acme/app", Name: "build", Source: "EphemeralRunner/runner-x", CreatedBy: arcController}})
}

func build(name, createdBy, project string) *v1alpha1.RunnerDeath {
	return record(name, v1alpha1.DeathRecord{Pod: "runner-" + name, Preset: "gitlab", Container: "build", Class: string(death.ProbeKill), LivenessProbe: true,
		Job: &v1alpha1.Job{ID: "42", Project: project, Source: runnerpod.JobFromPodMarks, CreatedBy: createdBy}})
}

func TestAnOOMIsToldOnceToGitHubAndTheSinkAcrossALeaderChange(t *testing.T) {
	w := newWorld(t, oom())
	w.reconcile(t, w.leader(), "oom")
	w.reconcile(t, w.leader(), "oom")
	w.reconcile(t, w.leader(), "oom")
	runs := w.gh.CheckRuns()
	require.Len(t, runs, 1, "one check run, whatever the leaders")
	cr := runs[0]
	assert.Empty(t, w.gh.Errors())
	assert.Equal(t, "acme/app", cr.Repository)
	assert.Equal(t, sha, cr.HeadSHA, "the workflow run's head commit, as GitHub says it")
	assert.Equal(t, "uid-oom", cr.ExternalID)
	assert.Equal(t, "runnerguard: build", cr.Name)
	assert.Equal(t, "failure", cr.Conclusion)
	assert.Equal(t, "Runner OOM-killed: 7.9 GiB of its 8 GiB", cr.Output.Title)
	assert.Contains(t, cr.Output.Summary, "kubectl runnerguard deaths -n ci --job 7311")
	assert.NotContains(t, cr.Output.Summary, "s3cret", "no last words by default")
	assert.True(t, strings.HasSuffix(cr.DetailsURL, "/acme/app/actions/runs/900123/job/7311"))
	require.Len(t, w.sink.Events(), 1)
	assert.Empty(t, w.sink.Errors())
	assert.Equal(t, "uid-oom", w.sink.Events()[0]["id"])
	assert.NotContains(t, w.sink.Events()[0]["data"].(map[string]any)["record"], "message")
	st := w.status(t, "oom")
	require.Len(t, st.Reports, 2)
	for _, rep := range st.Reports {
		assert.Equal(t, notify.PhaseSent, rep.Phase, rep.Destination)
		assert.Equal(t, int32(1), rep.Attempts)
		assert.NotEmpty(t, rep.Where)
	}
}

func TestALeaderThatStoppedMidAttemptLeavesItToTheNextWhichFindsItArrived(t *testing.T) {
	w := newWorld(t, oom())
	w.reconcile(t, w.leader(), "oom")
	// The outcome never written: the record says Sending, GitHub has it.
	o := &v1alpha1.RunnerDeath{}
	require.NoError(t, w.kube.Get(context.Background(), client.ObjectKey{Namespace: "ci", Name: "oom"}, o))
	base := o.DeepCopy()
	rep := *notify.Find(o.Status, notify.GitHub)
	rep.Phase, rep.Where = notify.PhaseSending, ""
	notify.Set(&o.Status, rep)
	require.NoError(t, w.kube.Status().Patch(context.Background(), o, client.MergeFrom(base)))
	w.reconcile(t, w.leader(), "oom")
	assert.Len(t, w.gh.CheckRuns(), 1, "found, not sent again")
	got := notify.Find(w.status(t, "oom"), notify.GitHub)
	assert.Equal(t, notify.PhaseSent, got.Phase)
	assert.Equal(t, int32(2), got.Attempts)
	assert.NotEmpty(t, got.Where)
}

func TestAGitLabJobIsToldOnItsCommitInItsPipeline(t *testing.T) {
	w := newWorld(t, build("probe", manager, "1234"))
	w.reconcile(t, w.leader(), "probe")
	w.reconcile(t, w.leader(), "probe")
	sts := w.gl.Statuses()
	require.Len(t, sts, 1)
	assert.Empty(t, w.gl.Errors())
	s := sts[0]
	assert.Equal(t, notifytest.Status{Project: "1234", SHA: sha, State: "failed", Name: "runnerguard: job 42", Ref: "main",
		TargetURL: w.gl.URL + "/1234/-/jobs/42", Description: "Runner killed for failing its liveness probe", PipelineID: 7}, s)
	assert.Equal(t, notify.PhaseSent, notify.Find(w.status(t, "probe"), notify.GitLab).Phase)
}

func TestABuildPodAnEditorCreatedIsNotToldToGitLab(t *testing.T) {
	w := newWorld(t, build("forged", "system:serviceaccount:ci:default", "9999"))
	w.reconcile(t, w.leader(), "forged")
	assert.Zero(t, w.gl.Calls(), "GitLab is not asked")
	rep := notify.Find(w.status(t, "forged"), notify.GitLab)
	require.NotNil(t, rep)
	assert.Equal(t, notify.PhaseSkipped, rep.Phase)
	assert.Contains(t, rep.Message, "not created by a configured GitLab Runner manager")
}

func TestAJobsNormalEndIsToldNowhere(t *testing.T) {
	r := oom()
	r.Record.Class = string(death.JobEnded)
	w := newWorld(t, r)
	w.reconcile(t, w.leader(), "oom")
	assert.Zero(t, w.gh.Calls())
	assert.Empty(t, w.sink.Events())
	assert.Empty(t, w.status(t, "oom").Reports)
}

func TestRefusalsAreRetriedAsTheServiceAsksThenCountedAndFailed(t *testing.T) {
	for _, c := range []struct {
		name     string
		code     int
		header   http.Header
		atLeast  time.Duration
		statusLb string
	}{
		{"a 429 waits its Retry-After", http.StatusTooManyRequests, http.Header{"Retry-After": {"120"}}, 120 * time.Second, "429"},
		{"a secondary limit's 403 without a wait waits a minute", http.StatusForbidden, nil, time.Minute, "403"},
		{"a 502 backs off", http.StatusBadGateway, nil, 10 * time.Second, "5xx"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, oom())
			w.cfg.Sinks = nil
			w.gh.Fail = func(r *http.Request) (int, http.Header) {
				if strings.HasSuffix(r.URL.Path, "/check-runs") && r.Method == http.MethodPost {
					return c.code, c.header
				}
				return 0, nil
			}
			before := testutil.ToFloat64(notify.FailuresTotal().WithLabelValues("github", c.statusLb))
			failedBefore := testutil.ToFloat64(notify.ReportsTotal().WithLabelValues("github", notify.PhaseFailed))
			res := w.reconcile(t, w.leader(), "oom")
			rep := notify.Find(w.status(t, "oom"), notify.GitHub)
			assert.Equal(t, notify.PhaseRetrying, rep.Phase)
			assert.Contains(t, rep.Message, "HTTP "+strconv.Itoa(c.code))
			assert.GreaterOrEqual(t, rep.NextAttemptAt.Sub(w.now), c.atLeast)
			assert.GreaterOrEqual(t, res.RequeueAfter, c.atLeast)
			// Not before its time, even by a new leader.
			w.reconcile(t, w.leader(), "oom")
			assert.Equal(t, int32(1), notify.Find(w.status(t, "oom"), notify.GitHub).Attempts)
			for range 2 {
				w.now = w.now.Add(time.Hour)
				w.reconcile(t, w.leader(), "oom")
			}
			rep = notify.Find(w.status(t, "oom"), notify.GitHub)
			assert.Equal(t, notify.PhaseFailed, rep.Phase)
			assert.Equal(t, int32(3), rep.Attempts)
			assert.Equal(t, 3.0, testutil.ToFloat64(notify.FailuresTotal().WithLabelValues("github", c.statusLb))-before)
			assert.Equal(t, 1.0, testutil.ToFloat64(notify.ReportsTotal().WithLabelValues("github", notify.PhaseFailed))-failedBefore)
			w.now = w.now.Add(time.Hour)
			w.reconcile(t, w.leader(), "oom")
			assert.Equal(t, int32(3), notify.Find(w.status(t, "oom"), notify.GitHub).Attempts, "no attempt after Failed")
			assert.Empty(t, w.gh.CheckRuns())
		})
	}
}

// An App installed on several organisations needs no installation id: the
// installation of each report's repository is asked of GitHub, as the App;
// a repository the App is not installed on fails the report, saying so.
func TestAnAppWithoutAnInstallationIDReportsThroughEachRepositorysInstallation(t *testing.T) {
	elsewhere := oom()
	elsewhere.Name, elsewhere.UID = "elsewhere", "uid-elsewhere"
	elsewhere.Record.Job = &v1alpha1.Job{ID: "7312", Run: "900124", Project: "other-org/app", Name: "build", Source: "EphemeralRunner/runner-x", CreatedBy: arcController}
	w := newWorld(t, oom(), elsewhere)
	w.cfg.GitHub.InstallationID = 0
	w.cfg.Sinks = nil
	r := w.leader()
	w.reconcile(t, r, "oom")
	require.Len(t, w.gh.CheckRuns(), 1, "the installation on acme/app was found")
	assert.Equal(t, "acme/app", w.gh.CheckRuns()[0].Repository)
	assert.Empty(t, w.gh.Errors(), "each request as the App or its installation, in GitHub's shapes")

	w.reconcile(t, r, "elsewhere")
	rep := w.status(t, "elsewhere").Reports[0]
	assert.Equal(t, notify.PhaseRetrying, rep.Phase)
	assert.Contains(t, rep.Message, "finding the App's installation on other-org/app (is the App installed there?)")
	assert.Len(t, w.gh.CheckRuns(), 1)
}

// A repository's installation is looked up once and kept for a while, so
// that a burst of deaths costs one lookup, and looked up again after: an
// App removed and installed again there has a new installation.
func TestARepositorysInstallationIsLookedUpOnceAndAgainLater(t *testing.T) {
	second, third := oom(), oom()
	second.Name, second.UID = "oom-2", "uid-oom-2"
	third.Name, third.UID = "oom-3", "uid-oom-3"
	w := newWorld(t, oom(), second, third)
	w.cfg.GitHub.InstallationID = 0
	w.cfg.Sinks = nil
	lookups := 0
	w.gh.Fail = func(r *http.Request) (int, http.Header) {
		if strings.HasSuffix(r.URL.Path, "/installation") {
			lookups++
		}
		return 0, nil
	}
	r := w.leader()
	w.reconcile(t, r, "oom")
	w.reconcile(t, r, "oom-2")
	assert.Equal(t, 1, lookups, "looked up once for two deaths")
	w.now = w.now.Add(2 * time.Hour)
	w.reconcile(t, r, "oom-3")
	assert.Equal(t, 2, lookups, "and again later")
	assert.Len(t, w.gh.CheckRuns(), 3)
}

// countingReader counts the Secrets read through it.
type countingReader struct {
	client.Reader
	secrets int
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Secret); ok {
		c.secrets++
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

// A told death's reports cost one write of its record per destination and
// one more (each outcome goes with the next claim), and a destination's
// Secret is read once a minute, not once a report: a rotation is taken up
// within the minute.
func TestADeathsReportsCostAWriteADestinationAndOneAndASecretIsReadOnceAMinute(t *testing.T) {
	second := oom()
	second.Name, second.UID = "oom2", "uid-oom2"
	w := newWorld(t, oom(), second)
	reader := &countingReader{Reader: w.kube}
	now := func() time.Time { return w.now }
	writes := 0
	counted := interceptor.NewClient(w.kube.(client.WithWatch), interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			writes++
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	r := &notify.Reporter{Reader: w.kube, Client: counted, Config: w.cfg, Senders: notify.Senders(w.cfg, reader, nil, now), Now: now}

	w.reconcile(t, r, "oom")
	st := w.status(t, "oom")
	require.Len(t, st.Reports, 2, "GitHub and the sink")
	for _, rep := range st.Reports {
		assert.Equal(t, notify.PhaseSent, rep.Phase, rep.Destination)
	}
	assert.Equal(t, 3, writes, "GitHub's claim; its outcome with the sink's claim; the sink's outcome")
	secretsFirst := reader.secrets
	assert.Equal(t, 2, secretsFirst, "the App's key and the sink's")

	w.reconcile(t, r, "oom2")
	assert.Equal(t, secretsFirst, reader.secrets, "read again within the minute")
	w.now = w.now.Add(time.Minute)
	rec := second.DeepCopy()
	rec.Name, rec.UID, rec.ResourceVersion = "oom3", "uid-oom3", ""
	require.NoError(t, w.kube.Create(context.Background(), rec))
	w.reconcile(t, r, "oom3")
	assert.Equal(t, secretsFirst+2, reader.secrets, "read again after it")
}
