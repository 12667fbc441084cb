package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
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
	"github.com/runnerguard/runnerguard/internal/recorder"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
	"github.com/runnerguard/runnerguard/internal/version"
	"github.com/runnerguard/runnerguard/webhook/guard"
	"github.com/runnerguard/runnerguard/webhook/inject"
)

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	configPath := fs.String("config", "", "config file (YAML); built-in defaults when empty")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; in-cluster config when empty")
	certDir := fs.String("cert-dir", "", "directory holding tls.crt and tls.key, reloaded when they change")
	port := fs.Int("port", 9443, "webhook server port")
	metricsAddr := fs.String("metrics-bind-address", ":8443", "metrics endpoint address (0 disables)")
	metricsSecure := fs.Bool("metrics-secure", true, "serve metrics over HTTPS to clients with a token allowed to get /metrics (TokenReview and SubjectAccessReview); false serves plain HTTP to anyone")
	metricsCertDir := fs.String("metrics-cert-dir", "", "directory holding the metrics server's tls.crt and tls.key; default: --cert-dir")
	reviewBudget := fs.Int64("review-budget-bytes", 4<<20, "bytes of review bodies handled at once (each review charged at least 64 KiB); more wait")
	probeAddr := fs.String("health-probe-bind-address", ":8081", "healthz and readyz endpoint address")
	pprofAddr := fs.String("pprof-bind-address", "0", "address of Go's pprof endpoints, for profiling a replica's memory and CPU (0 disables; bind it to localhost and port-forward)")
	watchPods := fs.Bool("watch", true, "run the pod watcher that records runner deaths (leader-elected with --leader-elect)")
	leaderElect := fs.Bool("leader-elect", false, "elect one replica to run the pod watcher; the webhooks serve on every replica")
	leNamespace := fs.String("leader-election-namespace", os.Getenv("POD_NAMESPACE"), "namespace of the leader election Lease")
	nsSelector := fs.String("namespace-selector", runnerpod.EnabledNamespaceLabel+"=true", "label selector of the namespaces the pod watcher covers and the guard acts in (the webhooks' namespaceSelector)")
	stuckAfter := fs.Duration("stuck-after", 10*time.Minute, "report a runner that has not started after this long")
	labelEvery := fs.Duration("label-interval", time.Minute, "how often the watcher's leader labels runner pods the injector did not see (created while it was down)")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	setMemoryLimit()

	cfg := config.Default()
	if *configPath != "" {
		var err error
		if cfg, err = config.Load(*configPath); err != nil {
			return err
		}
	}
	if *reviewBudget < maxReviewBytes {
		return fmt.Errorf("--review-budget-bytes: %d is below the largest review, %d bytes", *reviewBudget, maxReviewBytes)
	}
	if *metricsCertDir == "" {
		*metricsCertDir = *certDir
	}
	restCfg, err := restConfig(*kubeconfig)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsOptions(*metricsAddr, *metricsSecure, *metricsCertDir),
		HealthProbeBindAddress:  *probeAddr,
		PprofBindAddress:        *pprofAddr,
		LeaderElection:          *leaderElect,
		LeaderElectionID:        "runnerguard-watcher",
		LeaderElectionNamespace: *leNamespace,
		// Hand the watcher over at once on a rollout, not after the lease expires.
		LeaderElectionReleaseOnCancel: true,
		// The guard's metadata cache of pods keeps labelled runner pods
		// only, their names and UIDs (the watcher keeps its own).
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: {Label: recorder.RunnerPods(), Transform: recorder.StripPod}}},
		// controller-runtime's server watches the cert dir (certwatcher),
		// so a renewed serving certificate is picked up without a restart.
		WebhookServer: boundedServer{
			Server: webhook.NewServer(webhook.Options{Port: *port, CertDir: *certDir, TLSOpts: []func(*tls.Config){http1Only}}),
			limits: newReviewLimits(*reviewBudget),
		},
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	for _, register := range []func() error{
		func() error { return guard.RegisterMetrics(metrics.Registry) },
		func() error { return recorder.RegisterMetrics(metrics.Registry) },
		func() error { return registerBuildInfo(metrics.Registry) },
	} {
		if err := register(); err != nil {
			return fmt.Errorf("registering metrics: %w", err)
		}
	}
	// The webhooks' namespaces, which the guard checks a review's against
	// before it writes anything about it.
	sel, err := labels.Parse(*nsSelector)
	if err != nil {
		return fmt.Errorf("--namespace-selector: %w", err)
	}
	if err := guard.Register(mgr, cfg, *watchPods, sel); err != nil {
		return err
	}
	if err := inject.Register(mgr, cfg); err != nil {
		return err
	}
	if *watchPods {
		pods, err := podCache(mgr.GetConfig())
		if err != nil {
			return fmt.Errorf("setting up the pod watcher: %w", err)
		}
		w := &recorder.Watcher{Pods: pods, Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("runnerguard"), Config: cfg,
			Namespaces: sel, StuckAfter: *stuckAfter, Now: time.Now}
		if err := w.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the pod watcher: %w", err)
		}
		c := &recorder.Collector{Reader: mgr.GetAPIReader(), Client: mgr.GetClient(), Pods: pods, Presets: cfg.Presets, Policy: cfg.Records, Now: time.Now}
		l := &recorder.Labeler{Reader: mgr.GetAPIReader(), Client: mgr.GetClient(), Config: cfg, Namespaces: sel, Interval: *labelEvery}
		for _, r := range []manager.Runnable{c, l} {
			if err := mgr.Add(r); err != nil {
				return fmt.Errorf("setting up the pod watcher: %w", err)
			}
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return err
	}
	// The injector judges a pod by its namespace's Pod Security level, read
	// from the cache: start that informer with the manager and report ready
	// only once it has synced, so no first pod waits on it past its timeout.
	nsMeta := &metav1.PartialObjectMetadata{}
	nsMeta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if _, err := mgr.GetCache().GetInformer(context.Background(), nsMeta); err != nil {
		return fmt.Errorf("starting the namespace informer: %w", err)
	}
	if *watchPods {
		// The guard confirms a review's pod in the runner pods' metadata on
		// every replica (names and UIDs: a few hundred bytes a pod, so the
		// followers hold no whole pods).
		podMeta := &metav1.PartialObjectMetadata{}
		podMeta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
		if _, err := mgr.GetCache().GetInformer(context.Background(), podMeta); err != nil {
			return fmt.Errorf("starting the runner pod metadata informer: %w", err)
		}
	}
	if err := mgr.AddReadyzCheck("cache", func(r *http.Request) error {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("the namespace and runner pod caches have not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	ctrl.Log.Info("starting", "version", version.Version, "commit", version.Commit, "built", version.Date, "presets", len(cfg.Presets), "runnerContainers", cfg.RunnerContainerNames(), "watch", *watchPods, "leaderElect", *leaderElect)
	return mgr.Start(ctrl.SetupSignalHandler())
}

// instanceName names this replica in the Events it writes.
func instanceName() string {
	if n := os.Getenv("POD_NAME"); n != "" {
		return n
	}
	h, _ := os.Hostname()
	return h
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

// podCache is the watcher's informer of runner pods: in protobuf, the API
// server's cheaper encoding for built-in types, and resynced every 10 hours
// as the manager's caches are.
func podCache(cfg *rest.Config) (*recorder.PodCache, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	c, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return recorder.NewPodCache(c, 10*time.Hour)
}
