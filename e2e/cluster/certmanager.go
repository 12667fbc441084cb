package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
)

// certManagerModule is the module whose packages e2e/certmanager runs; its
// CRDs come from the same downloaded module, so they match the controllers.
const certManagerModule = "github.com/cert-manager/cert-manager"

// startCertManager applies cert-manager's CRDs server-side (two are over
// the client-side apply annotation limit) and runs its controllers and
// cainjector on the host with the admin's credentials.
func startCertManager(ctx context.Context, l layout) error {
	out, err := exec.CommandContext(ctx, "go", "list", "-C", filepath.Join(l.repo, "e2e", "certmanager"),
		"-m", "-f", "{{.Dir}}", certManagerModule).Output()
	if err != nil {
		return fmt.Errorf("finding cert-manager's module: %w", err)
	}
	crds := filepath.Join(strings.TrimSpace(string(out)), "deploy", "crds")
	if err := kubectl(ctx, l, "apply", "--server-side", "--field-manager=runnerguard-e2e", "-f", crds); err != nil {
		return err
	}
	if err := waitEstablished(ctx, l, "certificates.cert-manager.io", "issuers.cert-manager.io", "certificaterequests.cert-manager.io"); err != nil {
		return err
	}
	cs, err := clientset(l, "admin")
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cert-manager"}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := startLogged(l, "certmanager", l.cm, []string{"--kubeconfig=" + l.kubeconfig("admin")}); err != nil {
		return err
	}
	// Ready when it has issued a certificate: a self-signed Issuer and a
	// Certificate in its own namespace, as cert-manager's own smoke test.
	if err := kubectlStdin(ctx, l, smokeCertificate, "apply", "-f", "-"); err != nil {
		return err
	}
	return waitFor(ctx, l, "certmanager", 90*time.Second, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Secrets("cert-manager").Get(ctx, "e2e-smoke", metav1.GetOptions{})
		return err == nil, nil
	})
}

// waitEstablished waits until each CRD named is Established. Not kubectl
// wait: it fails at once on a CRD whose status has no conditions yet,
// which is how the API server shows a CRD it has just accepted.
func waitEstablished(ctx context.Context, l layout, names ...string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", l.kubeconfig("admin"))
	if err != nil {
		return err
	}
	c, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, name := range names {
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			crd, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be established: %w", name, err)
		}
	}
	return nil
}

const smokeCertificate = `
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: e2e-smoke, namespace: cert-manager}
spec: {selfSigned: {}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: e2e-smoke, namespace: cert-manager}
spec:
  commonName: e2e-smoke
  secretName: e2e-smoke
  issuerRef: {name: e2e-smoke, kind: Issuer}
`

// kubectl runs the cluster's own kubectl as the admin.
func kubectl(ctx context.Context, l layout, args ...string) error {
	return kubectlStdin(ctx, l, "", args...)
}

func kubectlStdin(ctx context.Context, l layout, stdin string, args ...string) error {
	cmd := exec.CommandContext(ctx, l.bin("kubectl"), append([]string{"--kubeconfig=" + l.kubeconfig("admin")}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}
