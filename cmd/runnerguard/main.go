// Command runnerguard serves the guard and injection webhooks.
//
//	runnerguard serve --config=/etc/runnerguard/config.yaml --cert-dir=DIR
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/runnerguard/runnerguard/webhook/config"
	"github.com/runnerguard/runnerguard/webhook/guard"
	"github.com/runnerguard/runnerguard/webhook/inject"
)

const usage = `usage: runnerguard serve [flags]

Commands:
  serve   serve the guard (validating) and inject (mutating) webhooks
`

func main() {
	if len(os.Args) < 2 || os.Args[1] != "serve" {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err := serve(os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "runnerguard:", err)
		os.Exit(1)
	}
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	configPath := fs.String("config", "", "config file (YAML); built-in defaults when empty")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; in-cluster config when empty")
	certDir := fs.String("cert-dir", "", "directory holding tls.crt and tls.key, reloaded when they change")
	port := fs.Int("port", 9443, "webhook server port")
	metricsAddr := fs.String("metrics-bind-address", ":8080", "metrics endpoint address (0 disables)")
	probeAddr := fs.String("health-probe-bind-address", ":8081", "healthz and readyz endpoint address")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	cfg := config.Default()
	if *configPath != "" {
		var err error
		if cfg, err = config.Load(*configPath); err != nil {
			return err
		}
	}
	restCfg, err := restConfig(*kubeconfig)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress: *probeAddr,
		// controller-runtime's server watches the cert dir (certwatcher),
		// so a renewed serving certificate is picked up without a restart.
		WebhookServer: webhook.NewServer(webhook.Options{Port: *port, CertDir: *certDir}),
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := guard.RegisterMetrics(metrics.Registry); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	guard.Register(mgr, cfg)
	if err := inject.Register(mgr, cfg); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return err
	}
	ctrl.Log.Info("starting", "presets", len(cfg.Presets), "runnerContainers", cfg.RunnerContainerNames())
	return mgr.Start(ctrl.SetupSignalHandler())
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return ctrl.GetConfig()
}
