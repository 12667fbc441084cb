package chart_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The CRDs of what the chart creates besides core objects, taken from the
// projects' own modules on the Go module proxy.
var crdModules = []struct{ module, dir string }{
	{"github.com/cert-manager/cert-manager@v1.21.2", "deploy/crds"},
	{"github.com/prometheus-operator/prometheus-operator@v0.85.0", "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"},
	{"github.com/prometheus-operator/prometheus-operator@v0.85.0", "example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml"},
}

// toolchains are the Go a pinned Kubernetes module needs where it needs a
// newer one than the harness's (its hack/kube-1.N module's toolchain line,
// read by pinnedKubeVersions): the go command refuses to download a module
// that requires a newer Go under `go test`, which runs it with
// GOTOOLCHAIN=local.
var toolchains = map[string]string{}

// moduleDir downloads a module (once; the module cache keeps it) and
// returns where it is.
func moduleDir(t *testing.T, module string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", module)
	if tc, ok := toolchains[module]; ok {
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN="+tc)
	}
	out, err := cmd.Output()
	require.NoError(t, err, "go mod download %s", module)
	var m struct{ Dir, Error string }
	require.NoError(t, json.Unmarshal(out, &m))
	require.Empty(t, m.Error)
	return m.Dir
}

// warnings collects the API server's warnings, which is how Pod Security
// speaks about a Deployment's pod template.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.list
	w.list = nil
	return l
}

// Every rendered object, the cert-manager Issuers and Certificates and the
// webhook configurations' CEL matchConditions among them, must be accepted
// by a real kube-apiserver with the real CRD schemas; the webhook's pods must
// pass the restricted Pod Security level in the release namespace.
func TestAPIServerAcceptsTheChart(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Skip("$KUBEBUILDER_ASSETS is not set: run `make chart-test`, which builds kube-apiserver and etcd")
	}
	h := helm4(t)
	var crds []string
	for _, m := range crdModules {
		crds = append(crds, filepath.Join(moduleDir(t, m.module), m.dir))
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDInstallOptions:     envtest.CRDInstallOptions{Paths: crds, ErrorIfPathMissing: true},
	}
	cfg, err := env.Start()
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, env.Stop()) })
	warned := &warnings{}
	cfg.WarningHandler = warned
	c, err := client.New(cfg, client.Options{})
	require.NoError(t, err)
	ctx := context.Background()

	restricted := map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	}
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: restricted}}))

	cases := []struct{ name, values string }{
		{name: "defaults"},
		{name: "every optional object and an existing issuer", values: `namespaces: [ci, builds]
certManager: {issuerRef: {name: corp-ca, kind: ClusterIssuer}}
metrics: {serviceMonitor: {enabled: true, interval: 30s, scrapeTimeout: 10s}}
guard: {deleteFailurePolicy: Ignore}
presets: {gitlab: {runnerContainers: [build, step], ownerPrincipals: [system:serviceaccount:ci:gitlab-runner]}}
networkPolicy: {enabled: true, metricsFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]}
watcher: {enabled: false}`},
		{name: "the alerts and the dashboard", values: `monitoring: {prometheusRule: {enabled: true}, grafanaDashboard: {enabled: true}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := h.render(t, tc.values)
			for _, u := range objs {
				err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
					client.FieldOwner("helm"), client.ForceOwnership, client.DryRunAll)
				assert.NoError(t, err, "%s %s", u.GetKind(), u.GetName())
			}
			assert.Empty(t, warned.take())

			// Pod Security only warns about a Deployment; a pod is refused.
			var d appsv1.Deployment
			objs.get(t, "Deployment", release, &d)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "webhook", Namespace: namespace}, Spec: d.Spec.Template.Spec}
			assert.NoError(t, c.Create(ctx, pod, client.DryRunAll), "the webhook pod must be admitted under restricted Pod Security")
			assert.Empty(t, warned.take())
		})
	}
}
