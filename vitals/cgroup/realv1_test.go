//go:build cgroupv1

package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// realV1Pod makes a pod-like v1 memory cgroup with two container cgroups
// (no processes) and returns its Group; it is removed when b ends.
func realV1Pod(b *testing.B) Group {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Skip("needs root to make memory cgroups")
	}
	hier := "/sys/fs/cgroup/memory"
	if _, err := os.Stat(hier + "/memory.limit_in_bytes"); err != nil {
		b.Skip("no cgroup v1 memory hierarchy")
	}
	name := fmt.Sprintf("runnerguard-bench-%d", os.Getpid())
	pod := filepath.Join(hier, name)
	ctrs := []string{filepath.Join(pod, ctr1), filepath.Join(pod, ctr2)}
	b.Cleanup(func() {
		for _, d := range append(ctrs, pod) {
			if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
				b.Errorf("remove bench cgroup: %v", err)
			}
		}
	})
	for _, d := range append([]string{pod}, ctrs...) {
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(pod+"/memory.limit_in_bytes", []byte("67108864"), 0o644); err != nil {
		b.Fatal(err)
	}
	g, err := Find("/sys/fs/cgroup", "", name, nil)
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// BenchmarkRealV1Read: one sample of a pod and two containers on the
// kernel's cgroupfs.
func BenchmarkRealV1Read(b *testing.B) {
	g := realV1Pod(b)
	p := NewPod(Options{Root: g.Root, Path: g.Dir()})
	if l := p.Read(); len(l.Missing) > 0 {
		b.Fatalf("missing %v", l.Missing)
	}
	loopCPU(b, func() { p.Read() })
}

// BenchmarkRealV1Counts: one OOM poll (three memory.oom_control reads).
func BenchmarkRealV1Counts(b *testing.B) {
	c := newV1Counter(realV1Pod(b), &ledger{})
	defer c.close()
	loopCPU(b, func() {
		if _, err := c.counts(); err != nil {
			b.Fatal(err)
		}
	})
}
