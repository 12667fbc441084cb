package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	if err := kubectl(ctx, l, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/certificates.cert-manager.io", "crd/issuers.cert-manager.io", "crd/certificaterequests.cert-manager.io"); err != nil {
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
