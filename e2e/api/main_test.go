//go:build e2e

package api

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/runnerguard/runnerguard/webhook/config"
)

// The suite's shared state: one API server, one runnerguard binary.
var (
	adminCfg *rest.Config
	admin    client.Client
	cs       *kubernetes.Clientset
	server   *webhookServer
	suiteCfg config.Config
)

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		code = 1
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return 1, fmt.Errorf("KUBEBUILDER_ASSETS is not set: run make e2e-api, which builds kube-apiserver and etcd")
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDs:                  []*apiextensionsv1.CustomResourceDefinition{ephemeralRunnerCRD()},
	}
	// 1.37 refuses a loopback advertise address in its endpoint reconciler;
	// envtest passes one, so turn the reconciler off.
	env.ControlPlane.GetAPIServer().Configure().Set("endpoint-reconciler-type", "none")
	var err error
	if adminCfg, err = env.Start(); err != nil {
		return 1, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	defer func() { _ = env.Stop() }()
	if admin, err = client.New(adminCfg, client.Options{Scheme: scheme.Scheme}); err != nil {
		return 1, err
	}
	if cs, err = kubernetes.NewForConfig(adminCfg); err != nil {
		return 1, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	suiteCfg = config.Default()
	suiteCfg.Guard.OwnerPrincipals = []string{ownerPrincipal}
	workDir, err := os.MkdirTemp("", "runnerguard-e2e-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(workDir)
	raw, err := yaml.Marshal(suiteCfg)
	if err != nil {
		return 1, err
	}
	configPath := filepath.Join(workDir, "config.yaml")
	if err := os.WriteFile(configPath, raw, 0o600); err != nil {
		return 1, err
	}
	if server, err = startServer(ctx, env, workDir, configPath); err != nil {
		return 1, err
	}
	defer server.Stop()
	if err := server.Register(ctx, suiteCfg); err != nil {
		return 1, err
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "runnerguard log kept at %s\n", server.logPath)
	}
	return code, nil
}
