package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// down ends the cluster: the kubelet first (so it restarts nothing), then
// every container, containerd and its shims, the control plane; then the
// mounts, the network and the pod cgroups it leaves, and the state folder
// except its logs. It is safe to run on a cluster that is not up.
func down(ctx context.Context, l layout) error {
	if _, err := os.Stat(l.dir); errors.Is(err, os.ErrNotExist) {
		return removeNetwork()
	}
	var errs []error
	for _, name := range []string{"certmanager", "kubelet", "kube-scheduler", "kube-controller-manager"} {
		errs = append(errs, stop(l, name, 15*time.Second))
	}
	if _, ok := running(l, "containerd"); ok {
		removeContainers(ctx, l)
	}
	errs = append(errs, stop(l, "containerd", 15*time.Second))
	killShims(l)
	for _, name := range []string{"registry", "kube-apiserver", "etcd"} {
		errs = append(errs, stop(l, name, 15*time.Second))
	}
	errs = append(errs, unmountUnder(l.dir), removeNetwork(), removePodCgroups())
	entries, _ := os.ReadDir(l.dir)
	for _, e := range entries {
		if e.Name() != "logs" {
			errs = append(errs, os.RemoveAll(filepath.Join(l.dir, e.Name())))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	logStep("cluster down")
	return nil
}

// removeContainers kills and removes every container containerd holds for
// the kubelet, pod sandboxes included.
func removeContainers(ctx context.Context, l layout) {
	ctr := func(args ...string) string {
		full := append([]string{"--address", l.containerdSocket(), "-n", "k8s.io"}, args...)
		out, _ := exec.CommandContext(ctx, "ctr", full...).Output()
		return string(out)
	}
	tasks := strings.Fields(ctr("tasks", "ls", "-q"))
	for _, id := range tasks {
		ctr("tasks", "kill", "-s", "SIGKILL", id)
	}
	for _, id := range tasks {
		ctr("tasks", "delete", "-f", id)
	}
	if ids := strings.Fields(ctr("containers", "ls", "-q")); len(ids) > 0 {
		ctr(append([]string{"containers", "delete"}, ids...)...)
	}
}

// killShims ends the runc shims that served this cluster's containerd, by
// pid: a shim's command line names the containerd socket it reports to.
func killShims(l layout) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if !strings.HasSuffix(args[0], "containerd-shim-runc-v2") || !contains(args, l.containerdSocket()) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// unmountUnder unmounts every mount point below dir, deepest first: the
// kubelet's volume mounts and containerd's rootfs and shm mounts.
func unmountUnder(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	// mountinfo names the real path: the kubelet resolves its root dir, and
	// .cache is often a symlink to a shared cache.
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], abs+"/") {
			points = append(points, fields[4])
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// removePodCgroups removes the kubelet's kubepods cgroups from every v1
// hierarchy (and the v2 one), leaves first; the kubelet recreates them.
func removePodCgroups() error {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	if _, err := os.Stat("/sys/fs/cgroup/kubepods"); err == nil {
		roots = append(roots, "/sys/fs/cgroup/kubepods")
	}
	var errs []error
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
