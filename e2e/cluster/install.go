package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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

// install installs runnerguard as the README tells a user to, with the
// same script: hack/install.sh with PUBLISH=1 publishes the image and the
// chart to the cluster's loopback registry (hack/release.sh, what `make
// release REGISTRY=...` runs), then installs the chart from
// oci://<registry>/charts/runnerguard, and the kubelet pulls the image the
// packaged chart pins by digest. The runner stand-in image is imported.
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
	args := []string{"--kubeconfig=" + l.kubeconfig("admin"), "--values=" + filepath.Join(l.repo, "e2e", "cluster", "values.yaml")}
	for _, v := range values {
		args = append(args, "--set="+v)
	}
	logStep("PUBLISH=1 REGISTRY=%s hack/install.sh %s", registry, strings.Join(args, " "))
	start := time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(l.repo, "hack", "install.sh"), args...)
	cmd.Env = append(os.Environ(), "REGISTRY="+registry, "PUBLISH=1", "HELM="+helm,
		"RELEASE="+releaseName, "NAMESPACE="+releaseNamespace)
	cmd.Env = append(cmd.Env, thisPlatformOnly()...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("hack/install.sh: %w", err)
	}
	logStep("released to %s and installed in %.1fs", registry, time.Since(start).Seconds())
	cs, err := clientset(l, "admin")
	if err != nil {
		return err
	}
	return probeInjection(ctx, cs)
}

// thisPlatformOnly narrows the release to what this machine's node runs:
// its platform's image and plugin archive, where a release builds every
// platform's, a cold cross-compile of the module graph each (`make image`,
// `make krew-test KREW_PLATFORMS=all` and the release workflow build them
// all). A caller's IMAGE_PLATFORMS or PLUGIN_PLATFORMS wins.
func thisPlatformOnly() []string {
	var env []string
	if os.Getenv("IMAGE_PLATFORMS") == "" {
		env = append(env, "IMAGE_PLATFORMS="+runtime.GOARCH)
	}
	if os.Getenv("PLUGIN_PLATFORMS") == "" {
		env = append(env, "PLUGIN_PLATFORMS="+runtime.GOOS+"_"+runtime.GOARCH)
	}
	return env
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
