package main

import (
	"context"
	"fmt"
	"sort"

	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/controller"
	logf "github.com/cert-manager/cert-manager/pkg/logs"

	// Each controller registers itself with controller.Known() in init():
	// the ones a self-signed Issuer -> CA Certificate -> CA Issuer ->
	// serving Certificate chain needs. Without the approver, requests wait
	// forever in WaitingForApproval.
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	// The issuer backends the issuers controllers set up.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// runControllers runs every registered controller the way cert-manager's
// controller command does: construct them all, start them, and only then
// start the shared informer factories, which by then know every informer
// the controllers asked for.
func runControllers(ctx context.Context, kubeconfig, clusterResourceNamespace string) error {
	ctx = logf.NewContext(ctx, klog.NewKlogr(), "controller")
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   qps,
		KubernetesAPIBurst: burst,
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace:        clusterResourceNamespace,
			ClusterIssuerAmbientCredentials: true,
		},
		CertificateOptions: controller.CertificateOptions{
			CopiedAnnotationPrefixes:                 copiedAnnotationPrefixes,
			CertificateRequestMinimumBackoffDuration: minimumRequestBackoff,
			CertificateRequestMaximumBackoffDuration: maximumRequestBackoff,
		},
	})
	if err != nil {
		return fmt.Errorf("building the controller context: %w", err)
	}
	known := controller.Known()
	names := make([]string, 0, len(known))
	for name := range known {
		names = append(names, name)
	}
	sort.Strings(names)

	g, ctx := errgroup.WithContext(ctx)
	for _, name := range names {
		c, err := known[name](factory)
		if err != nil {
			return fmt.Errorf("constructing controller %s: %w", name, err)
		}
		klog.InfoS("starting controller", "controller", name)
		g.Go(func() error {
			if err := c.Run(5, ctx); err != nil {
				return fmt.Errorf("controller %s: %w", name, err)
			}
			return nil
		})
	}
	// Every Build() shares the factory's informer factories.
	shared, err := factory.Build()
	if err != nil {
		return fmt.Errorf("building the shared context: %w", err)
	}
	shared.SharedInformerFactory.Start(ctx.Done())
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	return g.Wait()
}
