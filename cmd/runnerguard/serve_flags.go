package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// serveOptions are serve's flags.
type serveOptions struct {
	configPath, kubeconfig, certDir, metricsAddr, metricsCertDir string
	probeAddr, pprofAddr, leNamespace, nsSelector, webhookConfig string
	port, maxConnsPerSource, maxConns                            int
	metricsSecure, watchPods, leaderElect                        bool
	reviewBudget                                                 int64
	stuckAfter, labelEvery, jobOverEvery, jobOverGrace           time.Duration
	zap                                                          zap.Options
}

// newServeCommand is `serve`: the webhooks and the pod watcher, as the
// chart's Deployment runs them. Its flags are the chart's contract
// (templates/deployment.yaml passes them): renaming one breaks an install.
func newServeCommand() *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:               "serve",
		Short:             "Serve the guard (validating) and inject (mutating) webhooks and the pod watcher",
		Args:              positional(0, "serve [flags]"),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE:              func(*cobra.Command, []string) error { return failed(serve(o)) },
	}
	o.bind(cmd.Flags())
	return cmd
}

func (o *serveOptions) bind(fs *pflag.FlagSet) {
	fs.StringVar(&o.configPath, "config", "", "config file (YAML); built-in defaults when empty")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster config when empty")
	fs.StringVar(&o.certDir, "cert-dir", "", "directory holding tls.crt and tls.key, reloaded when they change")
	fs.IntVar(&o.port, "port", 9443, "webhook server port")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "metrics endpoint address (0 disables)")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS to clients with a token allowed to get /metrics (TokenReview and SubjectAccessReview); false serves plain HTTP to anyone")
	fs.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "directory holding the metrics server's tls.crt and tls.key; default: --cert-dir")
	fs.Int64Var(&o.reviewBudget, "review-budget-bytes", 4<<20, "bytes of review bodies each webhook path handles at once (each review charged at least 64 KiB; those over 1 MiB share one budget of one 4 MiB review for the whole server); more wait until the API server's webhook timeout, then get 503")
	fs.IntVar(&o.maxConnsPerSource, "max-connections-per-source", defaultMaxConnsPerSource, "open connections to the webhook port one source address may hold; more are closed at once (the API server sends its reviews from one address per replica: keep this above its concurrent reviews)")
	fs.IntVar(&o.maxConns, "max-connections", defaultMaxConns, "open connections to the webhook port from all sources together; more are closed at once")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "healthz and readyz endpoint address")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "address of Go's pprof endpoints, for profiling a replica's memory and CPU (0 disables; bind it to localhost and port-forward)")
	fs.BoolVar(&o.watchPods, "watch", true, "run the pod watcher that records runner deaths (leader-elected with --leader-elect)")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect one replica to run the pod watcher; the webhooks serve on every replica")
	fs.StringVar(&o.leNamespace, "leader-election-namespace", os.Getenv("POD_NAMESPACE"), "namespace of the leader election Lease")
	fs.StringVar(&o.nsSelector, "namespace-selector", runnerpod.EnabledNamespaceLabel+"=true", "label selector of the namespaces the pod watcher covers and the guard acts in (the webhooks' namespaceSelector)")
	fs.StringVar(&o.webhookConfig, "webhook-configuration", "", "the ValidatingWebhookConfiguration whose enforce registration selects the enforce namespaces, which the leader keeps busy runners' PodDisruptionBudgets in; empty: a namespace's runnerguard.io/mode label, else the config's guard.mode")
	fs.DurationVar(&o.stuckAfter, "stuck-after", 10*time.Minute, "report a runner that has not started after this long")
	fs.DurationVar(&o.jobOverEvery, "job-over-interval", 10*time.Minute, "where reports go to GitHub or GitLab, how often the leader asks the service whether a busy runner's job has ended")
	fs.DurationVar(&o.jobOverGrace, "job-over-grace", 5*time.Minute, "how long after its job ended, by its service's word, a runner that still runs is named a zombie (job-over)")
	fs.DurationVar(&o.labelEvery, "label-interval", time.Minute, "how often the watcher's leader labels runner pods the injector did not see (created while it was down)")
	// controller-runtime binds its logging flags (--zap-log-level, ...) to
	// a Go flag set only.
	goFlags := flag.NewFlagSet("zap", flag.ContinueOnError)
	o.zap.BindFlags(goFlags)
	fs.AddGoFlagSet(goFlags)
}

// config is the configuration serve runs with: the file's, over the
// defaults, checked with the flags it must agree with.
func (o serveOptions) config() (config.Config, error) {
	cfg := config.Default()
	if o.configPath != "" {
		var err error
		if cfg, err = config.Load(o.configPath); err != nil {
			return cfg, err
		}
	}
	if o.reviewBudget < maxReviewBytes {
		return cfg, fmt.Errorf("--review-budget-bytes: %d is below the largest review, %d bytes", o.reviewBudget, maxReviewBytes)
	}
	if o.maxConnsPerSource < 1 || o.maxConns < o.maxConnsPerSource {
		return cfg, fmt.Errorf("--max-connections-per-source (%d) must be at least 1 and at most --max-connections (%d)", o.maxConnsPerSource, o.maxConns)
	}
	return cfg, nil
}
