//go:build fleets

package fleets

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/e2e/internal/nodecluster"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/notify"
	"github.com/runnerguard/runnerguard/internal/notify/notifytest"
)

// The reporter's destinations are fakes of a GitHub Enterprise Server's and
// a self-managed GitLab's REST APIs (notifytest: each request is checked
// against the services' published shapes), served on the node bridge's
// host address, which runnerguard's leader reaches from its pod. TestMain
// turns reports on as an operator does (docs/operations/reports-github.md
// and reports-gitlab.md): the credentials in Secrets of the release's
// namespace, then a helm upgrade with the reports values.
const (
	githubAppID          = 4711
	githubInstallationID = 815
	githubSecret         = "runnerguard-github"
	gitlabToken          = "glpat-fleets"
	gitlabSecret         = "runnerguard-gitlab"
	// gitlabProject is the stand-in coordinator's project (its id).
	gitlabProject = "7"
	// arcRepository is the repository the stand-in Actions service names
	// for every job.
	arcRepository = arcOrg + "/fleet"
	// The Buildkite REST API's token (read_builds, write_builds) and its
	// Secret; the stand-in stack's jobs are all of build 1 of acme/app
	// (buildkiteapi.Service.BuildURL).
	buildkiteRESTToken = "bkua_fleets_rest"
	buildkiteSecret    = "runnerguard-buildkite"
	buildkiteBuild     = buildkiteOrg + "/app/1"
)

// The fakes, for the whole run.
var (
	githubAPI    *notifytest.GitHub
	gitlabAPI    *notifytest.GitLab
	buildkiteAPI *notifytest.Buildkite
)

// headSHA is the commit of the workflow run or GitLab job n: each its own,
// so a report on the wrong commit shows.
func headSHA(n int64) string { return fmt.Sprintf("%040x", n) }

// arcRuns are the stand-in's workflow runs (it numbers each job's run by
// its request id) and their head commits.
func arcRuns() map[string]string {
	runs := map[string]string{}
	for n := int64(101); n <= 120; n++ {
		runs[fmt.Sprintf("%s/%d", arcRepository, n)] = headSHA(n)
	}
	return runs
}

// startReports serves the fakes where the cluster's pods reach them and
// configures the installed chart's reports to tell them; stop ends them.
func startReports(root string) (stop func(), err error) {
	u, err := url.Parse(adminCfg.Host)
	if err != nil {
		return nil, err
	}
	var ls [3]net.Listener
	for i := range ls {
		if ls[i], err = net.Listen("tcp", net.JoinHostPort(u.Hostname(), "0")); err != nil {
			return nil, fmt.Errorf("listening on the node bridge's address: %w", err)
		}
	}
	githubAPI = notifytest.NewGitHubOn(ls[0], githubAppID, githubInstallationID, arcRuns())
	gitlabAPI = notifytest.NewGitLabOn(ls[1], gitlabToken)
	buildkiteAPI = notifytest.NewBuildkiteOn(ls[2], buildkiteRESTToken, nil)
	stop = func() {
		// What arrived over the whole run, the ends of the namespaces'
		// runners at cleanup included.
		for _, cr := range githubAPI.CheckRuns() {
			fmt.Printf("fake GitHub: check run %q on %s@%s: %s\n", cr.Name, cr.Repository, cr.HeadSHA, cr.Output.Title)
		}
		for _, s := range gitlabAPI.Statuses() {
			fmt.Printf("fake GitLab: status %q on project %s@%s: %s %s\n", s.Name, s.Project, s.SHA, s.State, s.Description)
		}
		for _, a := range buildkiteAPI.Annotations() {
			fmt.Printf("fake Buildkite: annotation %q (%s) on build %s, %d writes\n", a.Context, a.Style, a.Build, a.Writes)
		}
		githubAPI.Close()
		gitlabAPI.Close()
		buildkiteAPI.Close()
	}
	if err := reportSecrets(); err != nil {
		stop()
		return nil, err
	}
	if err := upgradeWithReports(root); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// reportSecrets writes the credentials where the docs put them:
// kubectl -n runnerguard create secret generic runnerguard-github
// --from-file=privateKey=..., and runnerguard-gitlab --from-literal=token=...
func reportSecrets() error {
	ctx := context.Background()
	for name, data := range map[string]map[string][]byte{
		githubSecret:    {notify.KeyPrivateKey: githubAPI.Key},
		gitlabSecret:    {notify.KeyToken: []byte(gitlabToken)},
		buildkiteSecret: {notify.KeyToken: []byte(buildkiteRESTToken)},
	} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNamespace, Name: name}, Data: data}
		err := admin.Create(ctx, s)
		if apierrors.IsAlreadyExists(err) {
			err = admin.Update(ctx, s)
		}
		if err != nil {
			return fmt.Errorf("secret %s: %w", name, err)
		}
	}
	return nil
}

// reportsValues are the chart values the docs give: the fleets' presets
// opted in, GitHub as an App on an Enterprise Server, a self-managed
// GitLab with every layout's manager named (managerInRunnerNamespace left
// false, its default), Buildkite's REST API trusting the job controller's
// pods.
func reportsValues() ([]byte, error) {
	return yaml.Marshal(map[string]any{"reports": map[string]any{
		"presets": []string{"gitlab", "arc-scale-set", "buildkite"},
		"github": map[string]any{"enabled": true, "url": githubAPI.URL(), "appID": githubAppID,
			"installationID": githubInstallationID, "secret": githubSecret,
			"controllers": []string{"system:serviceaccount:" + arcSystem + ":" + arcControllerSA}},
		"gitlab": map[string]any{"enabled": true, "url": gitlabAPI.URL, "secret": gitlabSecret,
			"managers": managerUsernames()},
		"buildkite": map[string]any{"enabled": true, "url": buildkiteAPI.URL + "/", "secret": buildkiteSecret,
			"creators": []string{jobControllerUser}},
	}})
}

// upgradeWithReports upgrades the release with the reports values, the
// chart the same one install put in the cluster's registry, the other
// values kept, and waits for the rollout to end with no old pod left.
func upgradeWithReports(root string) error {
	values, err := reportsValues()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "fleets-reports-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "reports.yaml")
	if err := os.WriteFile(file, values, 0o600); err != nil {
		return err
	}
	helm := nodecluster.EnvOr("HELM", filepath.Join(root, ".cache", "bin", "helm"))
	meta, err := exec.Command(helm, "get", "metadata", nodecluster.ReleaseName, "-n", releaseNamespace, "--kubeconfig", kubeconfigPath, "-o", "json").Output()
	if err != nil {
		return fmt.Errorf("helm get metadata: %w", err)
	}
	var md struct{ Chart, Version string }
	if err := json.Unmarshal(meta, &md); err != nil || md.Chart == "" || md.Version == "" {
		return fmt.Errorf("helm get metadata: no chart and version in %s (%v)", meta, err)
	}
	registry, err := os.ReadFile(filepath.Join(root, ".cache", "cluster", "registry.addr"))
	if err != nil {
		return fmt.Errorf("the cluster's registry: %w", err)
	}
	chart := "oci://" + strings.TrimSpace(string(registry)) + "/charts/" + md.Chart
	out, err := exec.Command(helm, "upgrade", nodecluster.ReleaseName, chart, "--version", md.Version, "--plain-http",
		"--reuse-values", "--values", file, "-n", releaseNamespace, "--kubeconfig", kubeconfigPath,
		"--wait", "--timeout", "5m").CombinedOutput()
	if err != nil {
		return fmt.Errorf("helm upgrade with reports: %w: %s", err, out)
	}
	return rolledOut()
}

// rolledOut waits until the release's pods are the Deployment's replicas,
// all ready and none terminating: the ARC part counts them for restarts.
func rolledOut() error {
	ctx := context.Background()
	return wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		pods := &corev1.PodList{}
		if admin.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: nodecluster.ReleaseName}, d) != nil ||
			admin.List(ctx, pods, client.InNamespace(releaseNamespace)) != nil || d.Spec.Replicas == nil {
			return false, nil
		}
		if len(pods.Items) != int(*d.Spec.Replicas) || d.Status.UpdatedReplicas != *d.Spec.Replicas {
			return false, nil
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil || !podReady(&p) {
				return false, nil
			}
		}
		return true, nil
	})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// settledReport waits until the record of pod holds a report to
// destination that is settled (Sent, Failed or Skipped), and returns it
// with the record and the record's object UID (the check run's
// external_id).
func settledReport(t *testing.T, pod podRef, destination string) (death.Record, string, v1alpha1.Report) {
	t.Helper()
	var rec death.Record
	var uid string
	var got v1alpha1.Report
	seen := "no record"
	ok := assert.Eventually(t, func() bool {
		list := &v1alpha1.RunnerDeathList{}
		if admin.List(context.Background(), list, client.InNamespace(pod.namespace),
			client.MatchingLabels{death.PodUIDLabel: string(pod.uid)}) != nil || len(list.Items) != 1 {
			return false
		}
		rec, uid = death.FromObject(&list.Items[0]), string(list.Items[0].UID)
		seen = fmt.Sprintf("class %s, reports %+v", rec.Class, rec.Reports)
		for _, rep := range rec.Reports {
			if rep.Destination == destination && (rep.Phase == notify.PhaseSent || rep.Phase == notify.PhaseFailed || rep.Phase == notify.PhaseSkipped) {
				got = rep
				return true
			}
		}
		return false
	}, 5*time.Minute, 500*time.Millisecond, "the report of %s/%s to %s", pod.namespace, pod.name, destination)
	if !ok {
		t.Fatalf("the report of %s/%s to %s: the record: %s", pod.namespace, pod.name, destination, seen)
	}
	return rec, uid, got
}

// reportsOnRecord reads the reports on the record of pod now.
func reportsOnRecord(t *testing.T, pod podRef) []v1alpha1.Report {
	t.Helper()
	recs := deathRecords(t, pod)
	require.Len(t, recs, 1)
	return recs[0].Reports
}

// statusesNamed are the commit statuses the fake GitLab was given named
// name.
func statusesNamed(name string) []notifytest.Status {
	var out []notifytest.Status
	for _, s := range gitlabAPI.Statuses() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// checkRunsOn are the check runs the fake GitHub was given on commit sha.
func checkRunsOn(sha string) []notifytest.CheckRun {
	var out []notifytest.CheckRun
	for _, cr := range githubAPI.CheckRuns() {
		if cr.HeadSHA == sha {
			out = append(out, cr)
		}
	}
	return out
}

// keepReport keeps what a fake received, for the docs, and logs it.
func keepReport(t *testing.T, name string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	f := artifact(t, name)
	require.NoError(t, os.WriteFile(f, b, 0o644))
	t.Logf("%s (kept in %s):\n%s", name, f, b)
}

// assertGitLabReport checks the report of job id's death: a death the
// reporter tells (death.Class.Told), of a job whose manager lives in a
// namespace of its own, is one commit status on the job's commit in its
// project, its description the death's title, its URL the job's page; its
// state failed, or skipped for a job ended on purpose (onPurpose: the
// override, a drain's deadline), which leaves the pipeline's result to its
// jobs. A manager in the build namespace is not trusted (anyone granted
// edit there can act as it): the report is Skipped and nothing is posted.
// A job's end is told nowhere (checked for the layout as a whole, once its
// told deaths are told: TestGitLabRunnerKubernetesExecutor).
func assertGitLabReport(t *testing.T, m *manager, id int64, pod podRef, class death.Class, onPurpose bool) {
	t.Helper()
	job := fmt.Sprint(id)
	name := notify.StatusName(job)
	if !death.Class(class).Told() {
		return
	}
	rec, _, rep := settledReport(t, pod, notify.GitLab)
	if !m.trusted {
		assert.Equal(t, notify.PhaseSkipped, rep.Phase, rep.Message)
		assert.Contains(t, rep.Message, "a ServiceAccount of the build pod's own namespace")
		assert.Empty(t, statusesNamed(name), "no status for a job whose manager is not trusted")
		return
	}
	require.Equal(t, notify.PhaseSent, rep.Phase, rep.Message)
	sts := statusesNamed(name)
	require.Len(t, sts, 1, "one commit status for job %d's death", id)
	want := notifytest.Status{Project: gitlabProject, SHA: headSHA(id), State: string(notify.State(rec)), Name: name, Ref: "main",
		TargetURL: gitlabAPI.URL + "/" + gitlabProject + "/-/jobs/" + job, Description: notify.Description(notify.Public(rec)), PipelineID: id}
	assert.Equal(t, want, sts[0])
	assert.Equal(t, want.TargetURL, rep.Where, "the record says where it was told")
	title := gitlabTitles[class]
	if onPurpose {
		assert.Equal(t, "skipped", sts[0].State, "a job ended on purpose does not fail its pipeline: a passing retry leaves it green")
		title = "Job ended on purpose: "
	} else {
		assert.Equal(t, "failed", sts[0].State, "a death fails the job's pipeline")
	}
	assert.True(t, strings.HasPrefix(sts[0].Description, title), "description %q", sts[0].Description)
	for what, name := range map[string]string{"the deleter": rec.DeletedBy, "the node": rec.Node, "the pod's UID": rec.UID} {
		if len(name) >= 3 {
			assert.NotContains(t, sts[0].Description, name, "a report names not %s", what)
		}
	}
	keepReport(t, "report-gitlab-"+string(class)+"-job-"+job+".json", sts[0])
}

// gitlabTitles are how the GitLab cases' told deaths begin, as
// docs/operations/reports-gitlab.md shows them.
var gitlabTitles = map[death.Class]string{
	death.ProcessOOM: "A process of the job was OOM-killed",
	death.JobTimeout: "Job hit its pod's time limit",
}

// assertGitLabReportsOfLayout checks the layout's reports once every case
// ran: a status for each told death of a trusted manager's jobs and none
// else, every request the fake received in GitLab's shapes.
func assertGitLabReportsOfLayout(t *testing.T, m *manager) {
	t.Helper()
	for _, j := range m.ran.all() {
		want := 0
		if death.Class(j.class).Told() && m.trusted {
			want = 1
		}
		assert.Len(t, statusesNamed(notify.StatusName(fmt.Sprint(j.id))), want, "statuses of job %d (%s)", j.id, j.class)
		if !death.Class(j.class).Told() {
			assert.Empty(t, reportsOnRecord(t, j.pod), "job %d's end (%s) is told nowhere", j.id, j.class)
		}
	}
	assert.Empty(t, gitlabAPI.Errors(), "requests outside GitLab's published shapes")
}

// assertGitHubReport checks the report of an ARC runner's death: one
// completed check run (neutral for a runner ended on purpose, else
// failure), naming no principal, node or UID, on the workflow run's head
// commit in the job's repository, titled and summed up from the record.
func assertGitHubReport(t *testing.T, pod podRef, run int64, titled string) notifytest.CheckRun {
	t.Helper()
	rec, uid, rep := settledReport(t, pod, notify.GitHub)
	require.Equal(t, notify.PhaseSent, rep.Phase, rep.Message)
	runs := checkRunsOn(headSHA(run))
	require.Len(t, runs, 1, "one check run on run %d's head commit", run)
	cr := runs[0]
	assert.Equal(t, arcRepository, cr.Repository)
	assert.Equal(t, "runnerguard: "+rec.Job.Name, cr.Name)
	assert.Equal(t, uid, cr.ExternalID, "the record's UID")
	assert.Equal(t, "completed", cr.Status)
	assert.Equal(t, notify.Conclusion(rec), cr.Conclusion, "neutral for a runner ended on purpose, else failure")
	assert.Equal(t, notify.Title(notify.Public(rec)), cr.Output.Title, "a report names no principal, node or UID by default")
	for what, name := range map[string]string{"the deleter": rec.DeletedBy, "the node": rec.Node, "the pod's UID": rec.UID} {
		if len(name) >= 3 {
			assert.NotContains(t, cr.Output.Title+cr.Output.Summary, name, "a report names not %s", what)
		}
	}
	assert.True(t, strings.HasPrefix(cr.Output.Title, titled), "title %q", cr.Output.Title)
	assert.Contains(t, cr.Output.Summary, "died: "+rec.Class)
	assert.Contains(t, cr.Output.Summary, "pod "+pod.namespace+"/"+pod.name)
	// The command that shows the rest: deaths --job for a numeric job id,
	// why for the stand-in's "job-N".
	assert.Contains(t, cr.Output.Summary, "The whole record: `"+notify.Command(rec)+"`")
	assert.NotEmpty(t, rep.Where, "the record says where it was told")
	keepReport(t, "report-github-"+rec.Class+"-run-"+fmt.Sprint(run)+".json", cr)
	return cr
}
