package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
)

// The controller command's own defaults, which live in cert-manager's
// internal packages (internal/apis/config/controller/v1alpha1/defaults.go)
// that another module cannot import.
const (
	qps                   = 20
	burst                 = 50
	minimumRequestBackoff = time.Hour
	maximumRequestBackoff = 32 * time.Hour
)

var copiedAnnotationPrefixes = []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"}

func main() {
	// controller-runtime already defines --kubeconfig on the default flag
	// set (its client config package); defining it again would panic, so
	// read that one.
	namespace := flag.String("cluster-resource-namespace", "cert-manager",
		"namespace of the Secrets that ClusterIssuers refer to")
	klog.InitFlags(nil)
	flag.Parse()
	kubeconfig := flag.Lookup("kubeconfig").Value.String()
	if kubeconfig == "" {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	if kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "certmanager: --kubeconfig or KUBECONFIG is required")
		os.Exit(2)
	}
	ctrl.SetLogger(klog.NewKlogr())

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return runControllers(ctx, kubeconfig, *namespace) })
	g.Go(func() error { return runCAInjector(ctx, kubeconfig) })
	if err := g.Wait(); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "certmanager:", err)
		os.Exit(1)
	}
}
