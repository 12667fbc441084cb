package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// addAPIServerAddress puts the API server's address on the loopback
// device: traffic to it never leaves the host, and pods reach it through
// their default route over the bridge.
func addAPIServerAddress() error {
	out, err := exec.Command("ip", "-o", "addr", "show", "dev", "lo").CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip addr show dev lo: %w: %s", err, out)
	}
	if strings.Contains(string(out), " "+apiserverIP+"/32 ") {
		return nil
	}
	return run("ip", "addr", "add", apiserverIP+"/32", "dev", "lo")
}

// removeNetwork removes what the cluster added to the host's network: the
// API server's address, the CNI bridge and the network namespaces of pod
// sandboxes that containerd could not remove.
func removeNetwork() error {
	var errs []string
	out, _ := exec.Command("ip", "-o", "addr", "show", "dev", "lo").CombinedOutput()
	if strings.Contains(string(out), " "+apiserverIP+"/32 ") {
		if err := run("ip", "addr", "del", apiserverIP+"/32", "dev", "lo"); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", bridgeName)); err == nil {
		if err := run("ip", "link", "delete", bridgeName); err != nil {
			errs = append(errs, err.Error())
		}
	}
	// containerd's CRI names its sandbox namespaces cni-<uuid>; no other
	// containerd runs on this machine.
	nsFiles, _ := filepath.Glob("/var/run/netns/cni-*")
	for _, ns := range nsFiles {
		_ = unix.Unmount(ns, unix.MNT_DETACH)
		if err := os.Remove(ns); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("removing the network: %s", strings.Join(errs, "; "))
	}
	return nil
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
