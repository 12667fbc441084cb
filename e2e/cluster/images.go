package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
)

// importImages loads image tarballs from the images folder into
// containerd's k8s.io namespace, where the kubelet finds them: the pod
// sandbox and the runner stand-ins, which pods use with imagePullPolicy
// Never (runnerguard's own image is pulled from the cluster's registry).
func importImages(ctx context.Context, l layout, tarballs ...string) error {
	for _, t := range tarballs {
		path := filepath.Join(l.images, t)
		out, err := exec.CommandContext(ctx, "ctr", "--address", l.containerdSocket(), "-n", "k8s.io",
			"images", "import", "--all-platforms", path).CombinedOutput()
		if err != nil {
			return fmt.Errorf("importing %s (hack/node-images.sh builds it): %w: %s", path, err, out)
		}
		logStep("imported %s", t)
	}
	return nil
}
