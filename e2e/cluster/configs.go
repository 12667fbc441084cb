package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// writeConfigs writes containerd's, the CNI's and the kubelet's
// configuration files.
func writeConfigs(l layout) error {
	for _, d := range []string{"logs", "pids", "run", "cni/net.d", "cni/ipam", "kubelet", "pod-logs", "etcd"} {
		if err := os.MkdirAll(l.path(d), 0o755); err != nil {
			return err
		}
	}
	files := map[string]string{
		l.path("containerd.toml"):                         containerdConfig(l),
		l.path("cni", "net.d", "10-runnerguard.conflist"): cniConfig(l),
		l.path("kubelet.yaml"):                            kubeletConfig(l),
	}
	for path, data := range files {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// containerdConfig: Debian's containerd 1.6 with its own root, state and
// socket under the state folder. restrict_oom_score_adj is required here:
// without it every sandbox fails with "can't get final child's PID from
// pipe: EOF", because the sandbox may not lower its oom_score_adj. Registry
// hosts are read from certs.d/<host:port>/hosts.toml (startRegistry).
func containerdConfig(l layout) string {
	return strings.TrimLeft(fmt.Sprintf(`
version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]

[grpc]
  address = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
`, l.path("containerd", "root"), l.path("containerd", "state"), l.containerdSocket(), pauseImage,
		l.path("certs.d"), l.path("cni", "net.d")), "\n")
}

// cniConfig: one bridge with a gateway address on the host, no masquerade
// (pods talk only to the host), addresses kept under the state folder.
func cniConfig(l layout) string {
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       cniNetworkName,
		"plugins": []any{map[string]any{
			"type":        "bridge",
			"bridge":      bridgeName,
			"isGateway":   true,
			"ipMasq":      false,
			"hairpinMode": true,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  [][]map[string]string{{{"subnet": podCIDR}}},
				"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
				"dataDir": l.path("cni", "ipam"),
			},
		}},
	}
	b, _ := json.MarshalIndent(conf, "", "  ")
	return string(b) + "\n"
}

// kubeletConfig: this machine's cgroups are v1, which kubelet 1.37 runs
// only when told (failCgroupV1: false) and with the cgroupfs driver. The
// kubelet's API is open to local anonymous callers (the API server fetching
// logs); it listens on the API server's address only. Eviction and image GC
// thresholds are low so a busy development disk never evicts the suite.
// localStorageCapacityIsolation stays on, as in a real cluster: without it
// the kubelet's cAdvisor collects no filesystem stats, its eviction manager
// cannot sync at all ("cannot find filesystem info for device"), and no pod
// is ever evicted for its ephemeral-storage limit.
func kubeletConfig(l layout) string {
	return strings.TrimLeft(fmt.Sprintf(`
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://%s
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
  x509:
    clientCAFile: %s
authorization:
  mode: AlwaysAllow
failSwapOn: false
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
localStorageCapacityIsolation: true
podLogsDir: %s
resolvConf: /etc/resolv.conf
clusterDomain: cluster.local
clusterDNS: [%s]
serializeImagePulls: false
syncFrequency: 10s
fileCheckFrequency: 10s
`, l.containerdSocket(), apiserverIP, kubeletPort, kubeletHealthz, l.pki("ca.crt"), l.path("pod-logs"), clusterDNS), "\n")
}

// kubeletRoot is the kubelet's --root-dir: pod volumes, plugins, its own
// serving certificate.
func kubeletRoot(l layout) string { return filepath.Join(l.dir, "kubelet") }
