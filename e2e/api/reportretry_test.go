//go:build e2e

package api

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/notify"
	"github.com/runnerguard/runnerguard/internal/notify/notifytest"
	"github.com/runnerguard/runnerguard/internal/podtest"
)

// clockedReporter is the leader's reporter run in the test's process on a
// clock the test moves, so that a wait the service asks for is checked
// without waiting it; the records are the suite's leader's, written by its
// recorder, read and written through the API server.
type clockedReporter struct {
	mu   sync.Mutex
	now  time.Time
	cfg  config.Reports
	kube client.Client
	rep  *notify.Reporter
}

func newClockedReporter(t *testing.T, cfg config.Reports) *clockedReporter {
	c := &clockedReporter{now: time.Now().Truncate(time.Second), cfg: cfg, kube: as(t, apitest.ServerUser)}
	c.newLeader()
	return c
}

func (c *clockedReporter) clock() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

// newLeader is a new leader's reporter: nothing carried over but the
// records (and the clock).
func (c *clockedReporter) newLeader() {
	c.rep = &notify.Reporter{Reader: c.kube, Client: c.kube, Config: c.cfg, Senders: notify.Senders(c.cfg, c.kube, nil, c.clock), Now: c.clock}
}

func (c *clockedReporter) advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// reconcile takes the record of pod one step, as the controller would.
func (c *clockedReporter) reconcile(t *testing.T, pod *corev1.Pod) (ctrl.Result, v1alpha1.Report) {
	t.Helper()
	list := &v1alpha1.RunnerDeathList{}
	require.NoError(t, admin.List(context.Background(), list, client.InNamespace(pod.Namespace), client.MatchingLabels{death.PodUIDLabel: string(pod.UID)}))
	require.Len(t, list.Items, 1)
	res, err := c.rep.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: pod.Namespace, Name: list.Items[0].Name}})
	require.NoError(t, err)
	o := &v1alpha1.RunnerDeath{}
	require.NoError(t, admin.Get(context.Background(), client.ObjectKeyFromObject(&list.Items[0]), o))
	for _, r := range o.Status.Reports {
		if r.Destination == notify.GitHub || r.Destination == notify.GitLab {
			return res, r
		}
	}
	return res, v1alpha1.Report{}
}

// counter is the value of a counter of reg.
func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	m, err := apitest.Gathered(reg)
	require.NoError(t, err)
	n, _ := m.Sum(name, labels)
	return n
}

func TestRefusalsAreRetriedWithBackoffAsTheServiceAsksThenCountedOnTheRecord(t *testing.T) {
	ns := newNamespace(t, nil)
	ctx := context.Background()
	gh := notifytest.NewGitHub(101, 202, map[string]string{"acme/app/" + strconv.FormatInt(reportRun, 10): reportSHA})
	gl := notifytest.NewGitLab("glpat-retry")
	t.Cleanup(func() { gh.Close(); gl.Close() })
	for name, data := range map[string]map[string][]byte{"retry-github": {notify.KeyPrivateKey: gh.Key}, "retry-gitlab": {notify.KeyToken: []byte("glpat-retry")}} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: apitest.ReleaseNamespace, Name: name}, Data: data}
		require.NoError(t, client.IgnoreAlreadyExists(admin.Create(ctx, s)))
		require.NoError(t, admin.Update(ctx, s))
	}
	cfg := config.Reports{Namespaces: []string{ns}, SecretNamespace: apitest.ReleaseNamespace, MaxAttempts: 3, MaxAge: metav1.Duration{Duration: time.Hour},
		GitHub: &config.GitHub{URL: gh.URL(), AppID: 101, InstallationID: 202, Secret: "retry-github", Controllers: []string{arcController}},
		GitLab: &config.GitLab{URL: gl.URL, Secret: "retry-gitlab", Managers: []string{ownerPrincipal}}}
	reg := prometheus.NewRegistry()
	require.NoError(t, notify.RegisterMetrics(reg))
	seq := 0

	type answer struct {
		code   int
		header http.Header
	}
	for _, c := range []struct {
		name    string
		answers []answer // the report's POSTs, in turn; then it is taken
		waits   []time.Duration
		status  string
		sent    bool
	}{
		{name: "a 403 that names no wait waits a minute, as GitHub advises for its secondary limits",
			answers: []answer{{403, nil}, {403, nil}, {403, nil}}, waits: []time.Duration{time.Minute, time.Minute}, status: "403"},
		{name: "a 429 waits its Retry-After",
			answers: []answer{{429, http.Header{"Retry-After": {"120"}}}, {429, http.Header{"Retry-After": {"300"}}}, {429, nil}}, waits: []time.Duration{120 * time.Second, 300 * time.Second}, status: "429"},
		{name: "a 5xx backs off, longer each time",
			answers: []answer{{502, nil}, {503, nil}, {500, nil}}, waits: []time.Duration{10 * time.Second, 20 * time.Second}, status: "5xx"},
		{name: "a 429 once, then the report goes",
			answers: []answer{{429, http.Header{"Retry-After": {"30"}}}}, waits: []time.Duration{30 * time.Second}, sent: true},
	} {
		for _, service := range []string{notify.GitHub, notify.GitLab} {
			t.Run(service+": "+c.name, func(t *testing.T) {
				var mu sync.Mutex
				posts := 0
				fail := func(r *http.Request) (int, http.Header) {
					if r.Method != http.MethodPost || !(isPost("/check-runs")(r) || isPost("/statuses/")(r)) {
						return 0, nil
					}
					mu.Lock()
					defer mu.Unlock()
					posts++
					if posts > len(c.answers) {
						return 0, nil
					}
					return c.answers[posts-1].code, c.answers[posts-1].header
				}
				var pod *corev1.Pod
				seq++
				i := strconv.Itoa(seq)
				if service == notify.GitHub {
					gh.Fail = fail
					pod = arcJobRunner(t, ns, "arc-retry-"+i, "4"+i, nil)
					writeStatus(t, pod, podtest.Runner(ns, pod.Name).Terminated("runner", 137, "OOMKilled").Obj().Status)
				} else {
					gl.Fail = fail
					gl.Jobs = append(gl.Jobs, notifytest.Job{Project: "42", ID: "8" + i, SHA: reportSHA, Ref: "main", Pipeline: 9})
					pod = gitlabRunner(t, ns, "runner-retry-project-42-concurrent-"+i, "8"+i, nil)
					writeStatus(t, pod, podtest.GitLab(ns, pod.Name).Terminated("build", 137, "OOMKilled").Obj().Status)
				}
				oneDeath(t, pod)
				r := newClockedReporter(t, cfg)
				failures := map[string]string{"destination": service, "status": c.status}
				failed := map[string]string{"destination": service, "phase": notify.PhaseFailed}
				failuresBefore, failedBefore := counter(t, reg, "runnerguard_report_failures_total", failures), counter(t, reg, "runnerguard_reports_total", failed)
				for n, wait := range c.waits {
					res, rep := r.reconcile(t, pod)
					require.Equal(t, notify.PhaseRetrying, rep.Phase, rep.Message)
					assert.Equal(t, int32(n+1), rep.Attempts)
					assert.Contains(t, rep.Message, "HTTP "+strconv.Itoa(c.answers[n].code))
					assert.Equal(t, rep.LastAttemptAt.Add(wait), rep.NextAttemptAt.Time, "the wait after attempt %d", n+1)
					assert.Equal(t, wait, res.RequeueAfter)
					// Not a second early, even by a new leader.
					r.advance(wait - time.Second)
					r.newLeader()
					res, rep = r.reconcile(t, pod)
					assert.Equal(t, int32(n+1), rep.Attempts, "no attempt before its time")
					assert.Equal(t, time.Second, res.RequeueAfter)
					r.advance(time.Second)
				}
				res, rep := r.reconcile(t, pod)
				assert.Zero(t, res.RequeueAfter)
				if c.sent {
					assert.Equal(t, notify.PhaseSent, rep.Phase, rep.Message)
					assert.NotEmpty(t, rep.Where)
					assert.Empty(t, rep.Message)
				} else {
					assert.Equal(t, notify.PhaseFailed, rep.Phase)
					assert.Contains(t, rep.Message, "HTTP "+strconv.Itoa(c.answers[len(c.answers)-1].code))
					assert.Equal(t, 3.0, counter(t, reg, "runnerguard_report_failures_total", failures)-failuresBefore, "each failed attempt counted")
					assert.Equal(t, 1.0, counter(t, reg, "runnerguard_reports_total", failed)-failedBefore, "and the report's failure")
				}
				assert.Equal(t, int32(len(c.waits)+1), rep.Attempts, "bounded")
				r.advance(24 * time.Hour)
				_, rep = r.reconcile(t, pod)
				assert.Equal(t, int32(len(c.waits)+1), rep.Attempts, "no attempt after the last")
				mu.Lock()
				assert.Equal(t, len(c.waits)+1, posts, "one POST an attempt")
				mu.Unlock()
			})
		}
	}
	assert.Empty(t, append(gh.Errors(), gl.Errors()...), "every request had the published shape")
}
