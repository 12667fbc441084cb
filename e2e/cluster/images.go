package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
)

// importImages loads image tarballs from the images folder into
// containerd's k8s.io namespace, where the kubelet finds them: no registry
// is reachable, so pods use imagePullPolicy IfNotPresent or Never.
func importImages(ctx context.Context, l layout, tarballs ...string) error {
	for _, t := range tarballs {
		path := filepath.Join(l.images, t)
		out, err := exec.CommandContext(ctx, "ctr", "--address", l.containerdSocket(), "-n", "k8s.io",
			"images", "import", "--all-platforms", path).CombinedOutput()
		if err != nil {
			return fmt.Errorf("importing %s (make image node-images builds it): %w: %s", path, err, out)
		}
		logStep("imported %s", t)
	}
	return nil
}
