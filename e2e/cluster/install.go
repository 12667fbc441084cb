package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// Where the chart is installed, and the namespace install probes with.
const (
	releaseName      = "runnerguard"
	releaseNamespace = "runnerguard"
	probeNamespace   = "runnerguard-probe"
)

// install loads the runnerguard and runner stand-in images into the node
// and installs the chart with Helm, then waits until the API server reaches
// the webhook through its Service: a dry-run runner pod comes back with the
// vitals sidecar.
func install(ctx context.Context, l layout, helm string, values []string) error {
	if err := importImages(ctx, l, "runnerguard.tar", "runner.tar"); err != nil {
		return err
	}
	sum, err := fileSum(filepath.Join(l.images, "runnerguard.tar"))
	if err != nil {
		return err
	}
	args := []string{"upgrade", "--install", releaseName, filepath.Join(l.repo, "charts", "runnerguard"),
		"--kubeconfig=" + l.kubeconfig("admin"), "--namespace=" + releaseNamespace, "--create-namespace",
		"--wait", "--timeout=5m", "--values=" + filepath.Join(l.repo, "e2e", "cluster", "values.yaml"),
		// A rebuilt image keeps its tag: the tarball's checksum in the pod
		// template rolls the webhook pods onto it.
		`--set-string=podAnnotations.e2e\.runnerguard\.io/image=` + sum}
	for _, v := range values {
		args = append(args, "--set="+v)
	}
	logStep("helm %s", strings.Join(args[:3], " "))
	start := time.Now()
	if out, err := exec.CommandContext(ctx, helm, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("helm upgrade --install: %w: %s", err, out)
	}
	logStep("chart installed in %.1fs", time.Since(start).Seconds())
	cs, err := clientset(l, "admin")
	if err != nil {
		return err
	}
	return probeInjection(ctx, cs)
}

// fileSum is the first 16 hex digits of a file's SHA-256.
func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// probeInjection creates a runner pod with server-side dry run in an
// opted-in namespace until the answer carries the vitals sidecar: then
// cainjector has put the CA in place and the webhook pods are reachable.
func probeInjection(ctx context.Context, cs kubernetes.Interface) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: probeNamespace,
		Labels: map[string]string{"runnerguard.io/enabled": "true"}}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !isExists(err) {
		return err
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: probeNamespace},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "runner", Image: "runnerguard.local/e2e/runner:1"}}},
	}
	start := time.Now()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().Pods(probeNamespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, c := range got.Spec.InitContainers {
			if c.Name == "runnerguard-vitals" {
				return true, nil
			}
		}
		last = "no vitals sidecar in the dry-run pod"
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the injector through the Service: %w (last: %s)", err, last)
	}
	logStep("webhooks answer through the Service (%.1fs)", time.Since(start).Seconds())
	return nil
}
