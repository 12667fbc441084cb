//go:build load

package load

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// The run's shared state: one API server, one runnerguard binary, and the
// figures each test adds to the report.
var (
	cluster *apitest.Cluster
	server  *apitest.Server
	// fast is the admin's clientset without client-side rate limiting,
	// so the client never queues a timed request. It speaks JSON, as
	// controller-runtime clients (ARC's among them) do.
	fast   *kubernetes.Clientset
	cfg    config.Config
	report = &Report{}
	// nothing serves the webhooks that do nothing (or refuse without
	// looking), in a process of their own.
	nothing *nothingServer
)

// The namespaces of the run. Each selects one admission setup by its
// labels, so all setups are measured side by side in one run, in
// interleaved rounds.
const (
	nsNone         = "load-none"          // no webhook or policy selects it
	nsGuard        = "load-webhook"       // runnerguard's webhooks, as the chart registers them
	nsNoMatch      = "load-nomatch"       // the guard without matchConditions, as Kyverno and Gatekeeper are called
	nsVAP          = "load-vap"           // the guard's rule as a ValidatingAdmissionPolicy
	nsInjectPolicy = "load-inject-policy" // the injection as the chart's MutatingAdmissionPolicy (1.36 and later)
	// Labels selecting the last three.
	noMatchLabel      = "runnerguard.io/load-nomatch"
	vapLabel          = "runnerguard.io/load-vap"
	injectPolicyLabel = "runnerguard.io/load-inject-policy"
)

func TestMain(m *testing.M) {
	if args := os.Getenv(nothingServeEnv); args != "" {
		os.Exit(serveNothing(args))
	}
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "load setup:", err)
		code = 1
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	report.LoadBefore = loadAvg()
	var err error
	// The audit log names the API requests runnerguard's server makes per
	// review (webhookReviews).
	if cluster, err = apitest.StartClusterAuditingServer(); err != nil {
		return 1, err
	}
	defer func() { _ = cluster.Stop() }()
	rc := rest.CopyConfig(cluster.Config)
	rc.QPS = -1
	rc.ContentType, rc.AcceptContentTypes = "application/json", "application/json"
	if fast, err = kubernetes.NewForConfig(rc); err != nil {
		return 1, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	cfg = configtest.Enforcing()
	workDir, err := os.MkdirTemp("", "runnerguard-load-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(workDir)
	// The server logs at its default level (info) and loads its kubeconfig
	// as it loads its in-cluster config, as the chart runs it.
	server, err = apitest.StartServer(ctx, cluster, apitest.ServerOptions{
		WorkDir: workDir, Config: cfg, LogName: "runnerguard-load.log", KubeconfigFromEnv: true,
	})
	if err != nil {
		return 1, err
	}
	defer server.Stop()
	if err := server.Register(ctx, cluster.Client, cfg); err != nil {
		return 1, err
	}
	noMatch, err := noMatchConditions(cfg, server)
	if err != nil {
		return 1, err
	}
	if err := cluster.Client.Create(ctx, noMatch); err != nil {
		return 1, fmt.Errorf("registering the guard without matchConditions: %w", err)
	}
	if nothing, err = startNothing(ctx); err != nil {
		return 1, err
	}
	defer nothing.stop()
	if err := nothing.register(ctx, cfg); err != nil {
		return 1, err
	}
	policy, binding, err := guardPolicy(cfg, server)
	if err != nil {
		return 1, err
	}
	if err := cluster.Client.Create(ctx, policy); err != nil {
		return 1, fmt.Errorf("creating the ValidatingAdmissionPolicy: %w", err)
	}
	if err := cluster.Client.Create(ctx, binding); err != nil {
		return 1, fmt.Errorf("creating the ValidatingAdmissionPolicyBinding: %w", err)
	}
	if err := server.RegisterInjectPolicy(ctx, cluster.Client, cfg, map[string]string{injectPolicyLabel: "true"}); err != nil {
		return 1, err
	}
	for name, labels := range map[string]map[string]string{
		nsNone:          nil,
		nsInjectPolicy:  {injectPolicyLabel: "true"},
		nsGuard:         {runnerpod.EnabledNamespaceLabel: "true"},
		nsNoMatch:       {noMatchLabel: "true"},
		nsVAP:           {vapLabel: "true"},
		nsNothing:       {nothingLabel: "true"},
		nsRefuser:       {refuserLabel: "true"},
		nsReader:        {readerLabel: "true"},
		nsNothingDelete: {nothingDeleteLabel: "true"},
		nsCapture:       nil,
	} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		if err := cluster.Client.Create(ctx, ns); err != nil {
			return 1, err
		}
	}
	// The node the run's pods are bound to, as a cluster has it: the
	// guard reads a busy runner's node for its drain deadline.
	if err := cluster.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}); err != nil {
		return 1, fmt.Errorf("creating node %s: %w", node, err)
	}
	code := m.Run()
	report.LoadAfter = loadAvg()
	report.Print(os.Stdout)
	if code != 0 {
		fmt.Fprintf(os.Stderr, "runnerguard log kept at %s\n", server.LogPath)
	}
	return code, nil
}
