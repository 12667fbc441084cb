//go:build node

package node

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// servingCert is the chart's serving Certificate for the suite's release.
const servingCert = releaseName + "-serving-cert"

// plugin runs a real kubectl with the binary installed as the kubectl
// plugin kubectl-runnerguard on its PATH, and the admin's kubeconfig.
func plugin(t *testing.T) func(args ...string) (string, string, int) {
	t.Helper()
	bin, err := whyBin()
	require.NoError(t, err)
	dir := t.TempDir()
	b, err := os.ReadFile(bin)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kubectl-runnerguard"), b, 0o755))
	return func(args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(kubectlBin, args...)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+kubeconfigPath)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return out.String(), errOut.String(), exit.ExitCode()
		}
		require.NoError(t, err)
		return out.String(), errOut.String(), 0
	}
}

// On the installed chart, through kubectl: green while the webhook pods
// serve; one line naming the cause when they are gone, and when
// cert-manager's certificate is not ready.
func TestCheckOnTheInstalledChart(t *testing.T) {
	kc := plugin(t)
	ns := newNamespace(t)

	t.Run("green on a healthy install", func(t *testing.T) {
		out, errOut, code := kc("runnerguard", "check", "-n", ns, "--wait", "1m")
		require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
		for _, want := range []string{
			"certificate  " + releaseNamespace + "/" + servingCert + ": Ready\n",
			"service      " + releaseNamespace + "/" + releaseName + ", ready endpoints: 2\n",
			"eviction.guard.runnerguard.io answered a dry-run eviction in " + ns,
			"inject.runnerguard.io answered a dry-run runner pod in " + ns,
			"ok: the API server reaches the guard and the injector, and the certificate is ready\n",
		} {
			assert.Contains(t, out, want)
		}
	})

	t.Run("one line when every webhook pod is gone", func(t *testing.T) {
		scaleWebhook(t, 0)
		t.Cleanup(func() {
			scaleWebhook(t, 2)
			waitInjection(t, ns)
		})
		out, errOut, code := kc("runnerguard", "check", "-n", ns)
		assert.Equal(t, 3, code, out)
		assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %s", errOut)
		assert.Contains(t, errOut, "error: the guard did not answer a dry-run eviction in "+ns+" (eviction.guard.runnerguard.io, ")
		assert.Contains(t, errOut, "no ready pod behind Service "+releaseNamespace+"/"+releaseName)
	})

	t.Run("one line when the certificate is not ready", func(t *testing.T) {
		// An issuer that does not exist: cert-manager marks the
		// Certificate not Ready (its Secret was issued by another), and
		// the webhooks keep serving the old certificate meanwhile.
		ctx := context.Background()
		crt := &unstructured.Unstructured{}
		crt.SetAPIVersion("cert-manager.io/v1")
		crt.SetKind("Certificate")
		require.NoError(t, admin.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: servingCert}, crt))
		issuer, _, _ := unstructured.NestedString(crt.Object, "spec", "issuerRef", "name")
		setIssuer := func(name string) error {
			return admin.Patch(ctx, crt, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"issuerRef":{"name":"`+name+`"}}}`)))
		}
		require.NoError(t, setIssuer("runnerguard-e2e-no-such-issuer"))
		t.Cleanup(func() {
			require.NoError(t, setIssuer(issuer))
			out, errOut, code := kc("runnerguard", "check", "-n", ns, "--wait", "2m")
			require.Equal(t, 0, code, "green again: %s%s", out, errOut)
		})
		var errOut string
		require.Eventually(t, func() bool {
			var code int
			_, errOut, code = kc("runnerguard", "check", "-n", ns)
			return code == 3
		}, time.Minute, time.Second, "check turns red")
		assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %s", errOut)
		assert.Contains(t, errOut, "error: certificate "+releaseNamespace+"/"+servingCert+" is not ready: ")
	})
}
