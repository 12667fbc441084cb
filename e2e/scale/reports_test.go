//go:build scale

package scale

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/notify"
	"github.com/runnerguard/runnerguard/internal/notify/notifytest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// The guarded run's reports: GitLab's commit statuses for its build pods
// and a CloudEvents sink for every told death of both runner namespaces,
// served by notifytest (held to GitLab's API and the CloudEvents and
// Standard Webhooks shapes). GitHub is absent: the fleet's ARC runners are
// the kill paths' few, not the plan's thousands.
const (
	glToken   = "glpat-scale"
	glProject = "42"
	reportSHA = "3f786850e387550fdab836ed7e6dc881de23001b"
	sinkKey   = "scale-hmac-key"
)

// reporting is the destinations and what the guarded run reports to them.
type reporting struct {
	gl   *notifytest.GitLab
	sink *notifytest.Sink
}

// jobOf is the GitLab job id the build pod of plan index i runs.
func jobOf(i int) string { return strconv.Itoa(700000 + i) }

// startReporting starts the destinations, writes their Secrets in the
// release namespace and sets cfg's reports to them for namespaces.
func startReporting(ctx context.Context, admin *kubernetes.Clientset, cfg *config.Config, namespaces ...string) (*reporting, error) {
	rp := &reporting{gl: notifytest.NewGitLab(glToken), sink: notifytest.NewSink([]byte(sinkKey))}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: apitest.ReleaseNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	for name, data := range map[string]map[string][]byte{"reports-gitlab": {notify.KeyToken: []byte(glToken)}, "reports-sink": {notify.KeyHMAC: []byte(sinkKey)}} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: apitest.ReleaseNamespace, Name: name}, Data: data}
		if _, err := admin.CoreV1().Secrets(apitest.ReleaseNamespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	cfg.Reports = config.Reports{Namespaces: namespaces, SecretNamespace: apitest.ReleaseNamespace, MaxAttempts: config.DefaultMaxAttempts,
		MaxAge: metav1.Duration{Duration: time.Hour},
		GitLab: &config.GitLab{URL: rp.gl.URL, Secret: "reports-gitlab", Managers: []string{gitlabUser}},
		Sinks:  []config.Sink{{Name: "alerts", URL: rp.sink.URL, Secret: "reports-sink"}}}
	return rp, nil
}

func (rp *reporting) close() {
	rp.gl.Close()
	rp.sink.Close()
}

// addJob makes r's job known to GitLab.
func (rp *reporting) addJob(r *runner) {
	rp.gl.AddJob(notifytest.Job{Project: glProject, ID: r.job, SHA: reportSHA, Ref: "main", Pipeline: 9})
}

// failed counts the jobs GitLab holds a failed status of runnerguard's for.
func (rp *reporting) failed() int { return jobsIn(rp.gl.Statuses(), "failed") }

// stallsTold counts the jobs GitLab was told a stall under way of (a
// running status), whatever their status became after.
func (rp *reporting) stallsTold() int { return jobsIn(rp.gl.Received(), "running") }

// jobsIn counts the jobs (a status's name is its job's) among statuses
// with one in state.
func jobsIn(statuses []notifytest.Status, state string) int {
	jobs := map[string]bool{}
	for _, s := range statuses {
		if s.State == state {
			jobs[s.Name] = true
		}
	}
	return len(jobs)
}

// stallBurst is how many stalls the leader tells at once (its
// fleet-wide limiter's burst, recorder's stallNotes); the rest follow a
// second apart.
const stallBurst = 50

// stall writes, as the node's kubelet does when the vitals sidecar's
// readiness probe fails, the sidecar of r's pod not ready, having run
// longer than a stall takes to be judged.
func stall(ctx context.Context, c client.Client, r *runner) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: r.name}, pod); err != nil {
			return err
		}
		found := false
		for i := range pod.Status.InitContainerStatuses {
			cs := &pod.Status.InitContainerStatuses[i]
			if cs.Name == runnerpod.VitalsContainer && cs.State.Running != nil {
				cs.Ready, found = false, true
				cs.State.Running.StartedAt = metav1.NewTime(time.Now().Add(-2 * time.Minute))
			}
		}
		if !found {
			return fmt.Errorf("%s/%s: no running vitals sidecar to stall", r.ns, r.name)
		}
		return c.Status().Update(ctx, pod)
	})
}

// stallAll stalls rs and waits for the leader to have counted each stall
// (runnerguard_runner_stalls_total, once a stall), so their deaths come
// after their stalls were seen, and for GitLab to be told of as many as
// the leader tells at once. It returns the leader's gauge of the pods
// stalled then.
func stallAll(ctx context.Context, t *testing.T, f fleet, rs []*runner, workers int) (stalledNow int) {
	t.Helper()
	if len(rs) == 0 {
		return 0
	}
	if errs := parallel(rs, workers, func(r *runner) error { return stall(ctx, f.crAdmin, r) }); len(errs) > 0 {
		t.Fatalf("%d stalls failed, first: %v", len(errs), errs[0])
	}
	// The leader's watcher may be minutes behind a fleet's burst of
	// changes at 10,000 runners (its record latency): the bound is its.
	apitest.Until(ctx, t, scaled(5*time.Minute, len(rs), 300*time.Millisecond), "the leader to see every stall", func() bool {
		for _, s := range f.replicas {
			if !isLeader(s) {
				continue
			}
			m, err := s.Scrape()
			if err != nil {
				return false
			}
			ns := map[string]string{"namespace": rs[0].ns}
			seen, _ := m.Sum("runnerguard_runner_stalls_total", ns)
			now, _ := m.Sum("runnerguard_runner_pods_stalled", ns)
			stalledNow = int(now)
			return seen >= float64(len(rs))
		}
		return false
	})
	told := min(len(rs), stallBurst)
	apitest.Until(ctx, t, scaled(3*time.Minute, told, 100*time.Millisecond), "GitLab to be told of the first stalls", func() bool { return f.rep.stallsTold() >= told })
	return stalledNow
}

// reportsTold waits for GitLab's failed status of every told build pod's
// death, and returns what the destinations received.
func (rp *reporting) reportsTold(ctx context.Context, t *testing.T, rs []*runner) reportCounts {
	t.Helper()
	want, told := 0, 0
	for _, r := range rs {
		if r.gitlab && r.fate == exits {
			want++
		}
		if death.Class(r.want()).Told() {
			told++
		}
		if r.restarts {
			told++ // its restart's cgroup-oom
		}
	}
	apitest.Until(ctx, t, scaled(3*time.Minute, want+told, 100*time.Millisecond), "GitLab's failed status of every OOM-killed build pod, and a sink event of every told death",
		func() bool { return rp.failed() >= want && len(rp.sink.Events()) >= told })
	return reportCounts{glWant: want, sinkWant: told, glFailed: rp.failed(), glStatuses: len(rp.gl.Statuses()), stallsTold: rp.stallsTold(),
		glErrors: len(rp.gl.Errors()), sinkEvents: len(rp.sink.Events()), sinkErrors: len(rp.sink.Errors())}
}

// reportCounts is what the destinations received.
type reportCounts struct {
	glWant, glFailed, glStatuses, stallsTold, glErrors int
	sinkWant, sinkEvents, sinkErrors                   int
}
