package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// The cluster's OCI registry: crane's in-memory one on a loopback port,
// started with the cluster and ended with it, so install pushes the image
// and chart there (hack/install.sh with PUBLISH=1, which runs
// hack/release.sh, as a release does to ghcr.io) and the
// kubelet pulls from it for the cluster's whole life, a restarted webhook
// pod included. containerd reaches it over plain HTTP through a hosts.toml
// in its registry config_path.

// servingPort finds the port in crane's "serving on port N" log line.
var servingPort = regexp.MustCompile(`serving on port ([0-9]+)`)

func startRegistry(ctx context.Context, l layout) error {
	if err := startLogged(l, "registry", l.crane, []string{"registry", "serve", "--address=127.0.0.1:0"}); err != nil {
		return err
	}
	var addr string
	err := waitFor(ctx, l, "registry", 30*time.Second, func(ctx context.Context) (bool, error) {
		log, _ := os.ReadFile(l.log("registry"))
		m := servingPort.FindSubmatch(log)
		if m == nil {
			return false, nil
		}
		addr = "127.0.0.1:" + string(m[1])
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v2/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return err
	}
	hosts := l.path("certs.d", addr, "hosts.toml")
	if err := os.MkdirAll(filepath.Dir(hosts), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(hosts, []byte(hostsConfig(addr)), 0o644); err != nil {
		return err
	}
	return os.WriteFile(l.path("registry.addr"), []byte(addr+"\n"), 0o644)
}

// hostsConfig tells containerd to pull from addr over plain HTTP.
func hostsConfig(addr string) string {
	return fmt.Sprintf("server = \"http://%s\"\n\n[host.\"http://%s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", addr, addr)
}

// registryAddr is the running cluster's registry, host:port.
func registryAddr(l layout) (string, error) {
	b, err := os.ReadFile(l.path("registry.addr"))
	if err != nil {
		return "", fmt.Errorf("the cluster's registry (go run ./e2e/cluster up starts it): %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
