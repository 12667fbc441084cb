// Command arc-controller runs ARC's gha-runner-scale-set controllers that
// own runner pods, the EphemeralRunnerSet and EphemeralRunner reconcilers,
// exactly as ARC's own main.go wires them in its scale-set mode. The
// AutoscalingRunnerSet and AutoscalingListener controllers are left out:
// the real-fleet suite creates the EphemeralRunnerSet itself and runs ARC's
// listener (cmd/ghalistener) on the host, where the pods that those two
// controllers would create cannot pull ARC's image.
package main

import (
	"flag"
	"fmt"
	"os"

	githubv1alpha1 "github.com/actions/actions-runner-controller/apis/actions.github.com/v1alpha1"
	"github.com/actions/actions-runner-controller/build"
	actionsgithubcom "github.com/actions/actions-runner-controller/controllers/actions.github.com"
	"github.com/actions/actions-runner-controller/controllers/actions.github.com/multiclient"
	"github.com/actions/actions-runner-controller/controllers/actions.github.com/secretresolver"
	"github.com/actions/actions-runner-controller/logger"
	"github.com/actions/actions-runner-controller/logging"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "arc-controller:", err)
		os.Exit(1)
	}
}

func run() error {
	var namespace, logLevel string
	flag.StringVar(&namespace, "watch-single-namespace", "", "the runners' namespace")
	flag.StringVar(&logLevel, "log-level", logging.LogLevelDebug, "debug, info, warn or error")
	flag.Parse()
	log, err := logging.NewLogger(logLevel, "text")
	if err != nil {
		return err
	}
	ctrl.SetLogger(log)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := githubv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	opts := ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Client: client.Options{Cache: &client.CacheOptions{
			DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}},
		}},
	}
	if namespace != "" {
		opts.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}}
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), opts)
	if err != nil {
		return err
	}
	if err := actionsgithubcom.SetupIndexers(mgr); err != nil {
		return err
	}
	slogLogger, err := logger.New(logLevel, "text")
	if err != nil {
		return err
	}
	rb := actionsgithubcom.ResourceBuilder{
		SecretResolver: secretresolver.New(mgr.GetClient(), multiclient.NewScaleset(), secretresolver.WithLogger(slogLogger)),
	}
	if err := (&actionsgithubcom.EphemeralRunnerReconciler{
		Client:          mgr.GetClient(),
		Log:             log.WithName("EphemeralRunner").WithValues("version", build.Version),
		Scheme:          mgr.GetScheme(),
		ResourceBuilder: rb,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&actionsgithubcom.EphemeralRunnerSetReconciler{
		Client:          mgr.GetClient(),
		Log:             log.WithName("EphemeralRunnerSet").WithValues("version", build.Version),
		Scheme:          mgr.GetScheme(),
		ResourceBuilder: rb,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
