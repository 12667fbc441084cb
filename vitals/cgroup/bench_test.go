package cgroup

import "testing"

// The cost of one sample (pod and two containers) and of one v1 OOM poll,
// on the testdata trees (page cache, so the file-system cost of a real
// cgroupfs is not in it: see the cgroupv1 benchmarks for that).
func BenchmarkRead(b *testing.B) {
	for _, tree := range []string{"v1-cgroupfs", "v2-cgroupfs", "v2-systemd-nopeak"} {
		b.Run(tree, func(b *testing.B) {
			p := NewPod(Options{Root: "testdata/" + tree, PodUID: podUID})
			p.Read()
			b.ReportAllocs()
			for b.Loop() {
				p.Read()
			}
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
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.counts(); err != nil {
			b.Fatal(err)
		}
	}
}
