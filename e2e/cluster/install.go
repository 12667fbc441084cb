package main

import (
	"context"
	"fmt"
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

// install publishes runnerguard to the cluster's registry with
// hack/release.sh (what `make release REGISTRY=...` runs) and installs the
// chart from there, as a user installs a release: helm pulls the chart
// from oci://<registry>/charts/runnerguard and the kubelet pulls the image
// the packaged chart pins by digest. The runner stand-in image is imported.
// Then it waits until the API server reaches the webhook through its
// Service: a dry-run runner pod comes back with the vitals sidecar.
func install(ctx context.Context, l layout, helm string, values []string) error {
	if err := importImages(ctx, l, "runner.tar"); err != nil {
		return err
	}
	registry, err := registryAddr(l)
	if err != nil {
		return err
	}
	logStep("hack/release.sh to %s", registry)
	start := time.Now()
	release := exec.CommandContext(ctx, filepath.Join(l.repo, "hack", "release.sh"))
	release.Env = append(os.Environ(), "REGISTRY="+registry)
	release.Stdout, release.Stderr = os.Stderr, os.Stderr
	if err := release.Run(); err != nil {
		return fmt.Errorf("hack/release.sh: %w", err)
	}
	version, err := releaseVersion(l)
	if err != nil {
		return err
	}
	logStep("released %s to %s in %.1fs", version, registry, time.Since(start).Seconds())
	args := []string{"upgrade", "--install", releaseName, "oci://" + registry + "/charts/runnerguard",
		"--version=" + version, "--plain-http",
		"--kubeconfig=" + l.kubeconfig("admin"), "--namespace=" + releaseNamespace, "--create-namespace",
		"--wait", "--timeout=5m", "--values=" + filepath.Join(l.repo, "e2e", "cluster", "values.yaml")}
	for _, v := range values {
		args = append(args, "--set="+v)
	}
	logStep("helm %s", strings.Join(args[:6], " "))
	start = time.Now()
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

// releaseVersion is the version hack/release.sh last published.
func releaseVersion(l layout) (string, error) {
	b, err := os.ReadFile(filepath.Join(l.repo, ".cache", "release", "outputs"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "version="); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("no version in .cache/release/outputs")
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
