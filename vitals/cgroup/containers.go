package cgroup

import (
	"os"
	"strings"
)

// ContainerID returns the container id a container cgroup directory is
// named for: the name itself with the cgroupfs driver, the part after the
// runtime's prefix in a systemd scope ("cri-containerd-<id>.scope",
// "crio-<id>.scope", "docker-<id>.scope"). CRI-O's "crio-conmon-<id>.scope"
// holds the monitor, not the container, and is no container.
func ContainerID(dir string) (string, bool) {
	if dir == "" {
		return "", false
	}
	base, scope := strings.CutSuffix(dir, ".scope")
	if !scope {
		return dir, true
	}
	if strings.Contains(base, "-conmon-") {
		return "", false
	}
	id := base[strings.LastIndex(base, "-")+1:]
	return id, id != ""
}

// child is one container cgroup of a pod.
type child struct{ id, name string }

// containers lists the container cgroups under a pod cgroup directory.
func containers(dir string) []child {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []child
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if id, ok := ContainerID(e.Name()); ok {
			out = append(out, child{id: id, name: e.Name()})
		}
	}
	return out
}

// short is the prefix of a container id that names it in Missing entries,
// as `crictl ps` shows ids.
func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
