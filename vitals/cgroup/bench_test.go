package cgroup

import (
	"syscall"
	"testing"
	"time"
)

// The cost of one sample (pod and two containers) and of one v1 OOM poll,
// on the testdata trees (page cache, so the file-system cost of a real
// cgroupfs is not in it: see the cgroupv1 benchmarks for that).
func BenchmarkRead(b *testing.B) {
	for _, tree := range []string{"v1-cgroupfs", "v2-cgroupfs", "v2-systemd-nopeak"} {
		b.Run(tree, func(b *testing.B) {
			p := NewPod(Options{Root: "testdata/" + tree, PodUID: podUID})
			p.Read()
			loopCPU(b, func() { p.Read() })
		})
	}
}

func BenchmarkV1Counts(b *testing.B) {
	g, err := Find("testdata/v1-cgroupfs", podUID, "", nil)
	if err != nil {
		b.Fatal(err)
	}
	c := newV1Counter(g, &ledger{})
	defer c.close()
	loopCPU(b, func() {
		if _, err := c.counts(); err != nil {
			b.Fatal(err)
		}
	})
}

// loopCPU runs f b.N times and reports, besides wall time, the process's
// CPU time per call (all threads, GC included): on a busy machine wall
// time counts the waits for a CPU too.
func loopCPU(b *testing.B, f func()) {
	b.ReportAllocs()
	before := cpuTime()
	for b.Loop() {
		f()
	}
	b.ReportMetric(float64((cpuTime()-before).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkV2Counts is one read of the pod's memory.events by the v2 watch:
// under a max events storm the watch reads it at most once per minGap, so
// this times 100 a second is the storm's cost.
func BenchmarkV2Counts(b *testing.B) {
	g, err := Find("testdata/v2-cgroupfs", podUID, "", nil)
	if err != nil {
		b.Fatal(err)
	}
	counts := v2Counts(g)
	loopCPU(b, func() {
		if _, err := counts(); err != nil {
			b.Fatal(err)
		}
	})
}
