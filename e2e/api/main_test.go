//go:build e2e

package api

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/fleet/gitlab"
	"github.com/runnerguard/runnerguard/internal/podtest"
)

// The suite's shared state: one API server, one runnerguard binary.
var (
	adminCfg *rest.Config
	admin    client.Client
	cs       *kubernetes.Clientset
	// auditLog is the API server's audit log of pod writes.
	auditLog string
	server   *apitest.Server
	replica  *apitest.Server
	// adminKubeconfig is a kubeconfig file for the admin, for the CLI.
	adminKubeconfig string
	suiteCfg        config.Config
)

func TestMain(m *testing.M) {
	// podtest builds container states around a fixed instant; the watcher
	// here runs on the real clock, and does not record a death older than
	// its retention (a day for a clean one). The suite's deaths happened
	// minutes ago.
	podtest.Start = time.Now().Add(-15 * time.Minute).Truncate(time.Second)
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		code = 1
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	cluster, err := apitest.StartAuditedCluster(apitest.EphemeralRunnerCRD(), apitest.CertificateCRD(), apitest.TaskRunCRD())
	if err != nil {
		return 1, err
	}
	defer func() { _ = cluster.Stop() }()
	adminCfg, admin, cs, auditLog = cluster.Config, cluster.Client, cluster.Clientset, cluster.AuditLog
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	suiteCfg = configtest.Enforcing()
	for i := range suiteCfg.Presets {
		if suiteCfg.Presets[i].Name == gitlab.Name {
			suiteCfg.Presets[i].OwnerPrincipals = []string{ownerPrincipal}
		}
	}
	// Retention that a test can see work: a few records a namespace,
	// collected every second.
	// The budgets are the outage suite's (outage_test.go, a server of its
	// own): here a test that frees a runner and evicts it at once judges
	// the webhook, not how soon the leader lifts the budget.
	suiteCfg.Marks.Budgets = false
	suiteCfg.Records.MaxPerNamespace = 3
	suiteCfg.Records.CollectInterval = metav1.Duration{Duration: time.Second}
	trustControllers(&suiteCfg)
	suiteCfg.Guard.ZombieReapers = []string{zombieReaper}
	workDir, err := os.MkdirTemp("", "runnerguard-e2e-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(workDir)
	server, err = apitest.StartServer(ctx, cluster, apitest.ServerOptions{
		WorkDir: workDir, Config: suiteCfg, LogName: "runnerguard-api.log",
		Args: []string{"--zap-log-level=2", "--leader-elect", "--leader-election-namespace=" + apitest.ReleaseNamespace, "--stuck-after=3s", "--job-over-interval=2s", "--job-over-grace=3s"},
	})
	if err != nil {
		return 1, err
	}
	defer server.Stop()
	// A second replica, as the chart runs two: the webhooks serve on both,
	// the pod watcher on the elected one.
	if replica, err = server.Replica(ctx, "runnerguard-api-replica.log"); err != nil {
		return 1, err
	}
	defer replica.Stop()
	if err := writeAdminKubeconfig(cluster, workDir); err != nil {
		return 1, err
	}
	if err := server.Register(ctx, admin, suiteCfg); err != nil {
		return 1, err
	}
	// The whole suite runs under the policy, as the chart ships it, so every
	// fleet flow the other tests play must pass it too.
	if err := registerPolicy(ctx); err != nil {
		return 1, err
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "runnerguard log kept at %s\n", server.LogPath)
	}
	return code, nil
}
