package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/namespace"
	"github.com/runnerguard/runnerguard/internal/notify"
	"github.com/runnerguard/runnerguard/internal/printable"
	"github.com/runnerguard/runnerguard/internal/recorder"
	"github.com/runnerguard/runnerguard/internal/responder"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
	"github.com/runnerguard/runnerguard/internal/version"
	"github.com/runnerguard/runnerguard/webhook/guard"
	"github.com/runnerguard/runnerguard/webhook/inject"
)

func serve(o serveOptions) error {
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	setMemoryLimit()
	cfg, err := o.config()
	if err != nil {
		return err
	}
	mgr, err := newManager(o)
	if err != nil {
		return err
	}
	if err := registerMetrics(); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	// The webhooks' namespaces: the recorder's, and those the guard checks a
	// review's against before it writes anything about it.
	sel, err := labels.Parse(o.nsSelector)
	if err != nil {
		return fmt.Errorf("--namespace-selector: %w", err)
	}
	if err := guard.Register(mgr, cfg, o.watchPods, sel); err != nil {
		return err
	}
	if err := inject.Register(mgr, cfg); err != nil {
		return err
	}
	if o.watchPods {
		if err := addRecorder(mgr, cfg, o, sel); err != nil {
			return fmt.Errorf("setting up the pod watcher: %w", err)
		}
	}
	if err := addProbes(mgr, o.watchPods); err != nil {
		return err
	}
	build := version.Current()
	ctrl.Log.Info("starting", "version", build.Version, "commit", build.Commit, "built", build.Date, "presets", len(cfg.Presets), "runnerContainers", cfg.RunnerContainerNames(), "watch", o.watchPods, "leaderElect", o.leaderElect)
	return mgr.Start(ctrl.SetupSignalHandler())
}

// newManager is the manager every part runs in: the webhook server with its
// review budget, metrics, probes, leader election for the recorder, and the
// guard's metadata cache of runner pods.
func newManager(o serveOptions) (manager.Manager, error) {
	metricsCertDir := o.metricsCertDir
	if metricsCertDir == "" {
		metricsCertDir = o.certDir
	}
	restCfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsOptions(o.metricsAddr, o.metricsSecure, metricsCertDir),
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "runnerguard-watcher",
		LeaderElectionNamespace: o.leNamespace,
		// Hand the watcher over at once on a rollout, not after the lease expires.
		LeaderElectionReleaseOnCancel: true,
		// controller-runtime's defaults, named: the gap holds removals
		// for as long as they leave no leader (recorder.GapKeep).
		LeaseDuration: ptr.To(leaseDuration), RenewDeadline: ptr.To(renewDeadline), RetryPeriod: ptr.To(retryPeriod),
		// The guard's metadata cache of pods keeps labelled runner pods
		// only, their names and UIDs (the watcher keeps its own).
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: guard.PodCacheOptions(),
			&corev1.Node{}: guard.NodeCacheOptions(), &policyv1.PodDisruptionBudget{}: recorder.BudgetCacheOptions()}},
		// The server watches the cert dir (controller-runtime's
		// certwatcher), so a renewed serving certificate is picked up
		// without a restart.
		WebhookServer: boundedServer{
			Server: newLimitedServer(webhook.Options{Port: o.port, CertDir: o.certDir, TLSOpts: []func(*tls.Config){http1Only}},
				newConnLimits(o.maxConnsPerSource, o.maxConns)),
			budgets: newReviewBudgets(o.reviewBudget),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	return mgr, nil
}

// addResponder adds the leader's eviction responder where the API server
// serves eviction requests, as the injector finds at its start (the same
// discovery: a pod is named as runnerguard's only where it answers); nil,
// and nothing added, elsewhere.
func addResponder(mgr manager.Manager, marker *recorder.Marker) (*recorder.Answered, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	if !responder.ServedBy(dc) {
		return nil, nil
	}
	dyn, err := dynamic.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	answered := recorder.NewAnswered(recorder.AnsweredKept)
	r := &recorder.Responder{Marker: marker, Dynamic: dyn, Answered: answered, Now: time.Now}
	return answered, r.SetupWithManager(mgr)
}

func registerMetrics() error {
	for _, register := range []func(prometheus.Registerer) error{guard.RegisterMetrics, recorder.RegisterMetrics, notify.RegisterMetrics, registerBuildInfo, registerConnMetrics} {
		if err := register(metrics.Registry); err != nil {
			return err
		}
	}
	return nil
}

// addRecorder adds the leader's pod watcher, its retention collector, its
// labeler and its marker.
func addRecorder(mgr manager.Manager, cfg config.Config, o serveOptions, sel labels.Selector) error {
	podsClient, err := podsClient(mgr.GetConfig())
	if err != nil {
		return err
	}
	pods, err := recorder.NewPodCache(podsClient, 10*time.Hour)
	if err != nil {
		return err
	}
	gap := recorder.NewGap(podsClient, recorder.GapKeep(leaseDuration, renewDeadline, retryPeriod), gapPods, time.Now)
	if err := mgr.AddReadyzCheck("gap", gap.Watched); err != nil {
		return err
	}
	// The marker's watch of ARC's EphemeralRunners keeps each one's job
	// for the watcher's records, written after ARC deleted it.
	jobs := recorder.NewLastJobs(recorder.LastJobsKept)
	modes := &recorder.Modes{Reader: mgr.GetAPIReader(), Name: o.webhookConfig, Default: cfg.Guard.Mode, Interval: 5 * time.Second}
	events := printable.Recorder(mgr.GetEventRecorder("runnerguard"))
	// One sender a report destination, for the reporter, the stall
	// reports and the job-over asks alike.
	senders := notify.Senders(cfg.Reports, mgr.GetAPIReader(), nil, time.Now)
	w := &recorder.Watcher{Pods: pods, Gap: gap, Client: mgr.GetClient(), Recorder: events, Config: cfg,
		Namespaces: sel, Modes: modes, StuckAfter: o.stuckAfter, Now: time.Now, Jobs: jobs, Senders: senders}
	if err := w.SetupWithManager(mgr); err != nil {
		return err
	}
	marker := &recorder.Marker{Pods: pods, Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Config: cfg, Namespaces: sel, Modes: modes, Now: time.Now, Jobs: jobs,
		Zombies: &recorder.Zombies{Client: mgr.GetClient(), Recorder: events}, Over: jobsOver(cfg, senders, w, o)}
	if err := marker.SetupWithManager(mgr); err != nil {
		return err
	}
	if w.Evictions, err = addResponder(mgr, marker); err != nil {
		return err
	}
	if err := mgr.Add(modes); err != nil {
		return err
	}
	c := &recorder.Collector{Reader: mgr.GetAPIReader(), Client: mgr.GetClient(), Pods: pods, Presets: cfg.Presets, Gap: gap, Policy: cfg.Records, Now: time.Now}
	l := &recorder.Labeler{Reader: mgr.GetAPIReader(), Client: mgr.GetClient(), Config: cfg, Namespaces: sel, Interval: o.labelEvery}
	for _, r := range []manager.Runnable{c, l} {
		if err := mgr.Add(r); err != nil {
			return err
		}
	}
	return addReporter(mgr, cfg, senders)
}

// addProbes adds liveness, and readiness once the webhook server serves and
// the caches the webhooks read have synced.
func addProbes(mgr manager.Manager, runnerPods bool) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return err
	}
	// The injector judges a pod by its namespace's Pod Security level, read
	// from the cache: start that informer with the manager and report ready
	// only once it has synced, so no first pod waits on it past its timeout.
	if _, err := mgr.GetCache().GetInformer(context.Background(), namespace.Meta()); err != nil {
		return fmt.Errorf("starting the namespace informer: %w", err)
	}
	if runnerPods {
		// The guard confirms a review's pod in the runner pods' metadata on
		// every replica (names and UIDs, so the followers hold no whole
		// pods).
		if _, err := mgr.GetCache().GetInformer(context.Background(), runnerpod.Meta()); err != nil {
			return fmt.Errorf("starting the runner pod metadata informer: %w", err)
		}
		// And reads a busy runner's node for its drain deadline in the
		// nodes' metadata, so a refusal's answer waits on no request.
		if _, err := mgr.GetCache().GetInformer(context.Background(), guard.NodeMeta()); err != nil {
			return fmt.Errorf("starting the node metadata informer: %w", err)
		}
	}
	return mgr.AddReadyzCheck("cache", func(r *http.Request) error {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("the namespace, runner pod and node caches have not synced")
		}
		return nil
	})
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return ctrl.GetConfig()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	// As ctrl.GetConfig does: no client-side rate limit (the API server's
	// priority and fairness applies), or death Events and eviction lookups
	// queue behind client-go's default 5 requests per second.
	if cfg.QPS == 0 {
		cfg.QPS = -1
	}
	return cfg, nil
}

// podsClient is the client of the watcher's informer of runner pods (resynced
// every 10 hours, as the manager's caches are) and of the gap's watch: in
// protobuf, the API server's cheaper encoding for built-in types.
func podsClient(cfg *rest.Config) (*corev1client.CoreV1Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return corev1client.NewForConfig(cfg)
}

// The leader election's timing (controller-runtime's defaults).
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

// gapPods bounds the removals a replica holds for the next leader, and so
// what a follower's gap can cost (recorder's BenchmarkGapMemory): a burst of
// jobs ending within the hold beyond it loses its oldest removals, and only
// if no replica leads then.
const gapPods = 2000
