package cgroup

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runnerguard/runnerguard/vitals/record"
)

const (
	ctr1 = "4f1c0bd2e3a4b5c6d7e8f90123456789abcdef0123456789abcdef012345678a"
	ctr2 = "9ab0c1d2e3f405162738495a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8"
)

func u64(v uint64) *uint64 { return &v }
func flag(v bool) *bool    { return &v }

func psi(avg10 float64, total uint64) *record.Pressure {
	return &record.Pressure{SomeAvg10: avg10, SomeAvg60: 0.09, SomeTotal: total, FullAvg10: avg10, FullAvg60: 0.09, FullTotal: total}
}

// copyTree copies a testdata tree to a temp dir the test may change.
func copyTree(t *testing.T, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.CopyFS(dst, os.DirFS(filepath.Join("testdata", name))))
	return dst
}

func TestPodRead(t *testing.T) {
	cases := []struct {
		name  string
		tree  string
		reads int                             // the wanted line is the last of this many reads
		edit  func(t *testing.T, root string) // runs before the last read
		want  record.Line
	}{
		{
			name: "a v2 pod whose container was OOM-killed reads with peak, limit, events and pressure",
			tree: "v2-cgroupfs",
			want: record.Line{Cgroup: V2,
				Pod: record.Memory{Current: u64(12288), Peak: u64(52428800), Limit: u64(52428800),
					Events: &record.Events{Max: 35, OOM: 1, OOMKill: 1}, Pressure: psi(0.54, 99462)},
				Containers: map[string]record.Memory{
					ctr1: {Current: u64(4096), Peak: u64(52682752), Events: &record.Events{OOMKill: 1}, Pressure: psi(0.54, 99478)},
					ctr2: {Current: u64(552960), Peak: u64(712704), Events: &record.Events{}, Pressure: psi(0, 0)},
				}},
		},
		{
			name:  "a v2 pod on a kernel without memory.peak keeps the highest current seen and says so",
			tree:  "v2-systemd-nopeak",
			reads: 2,
			edit: func(t *testing.T, root string) {
				// Between the reads usage fell: the observed peak stays.
				pod := filepath.Join(root, "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod3f9e1c2a_7b4d_4e8f_9a1b_2c3d4e5f6a7b.slice")
				require.NoError(t, os.WriteFile(filepath.Join(pod, "memory.current"), []byte("4096\n"), 0o644))
			},
			want: record.Line{Cgroup: V2,
				Pod: record.Memory{Current: u64(4096), Peak: u64(9871360), PeakObserved: true, Events: &record.Events{}},
				Containers: map[string]record.Memory{
					ctr1: {Current: u64(9437184), Peak: u64(9437184), PeakObserved: true, Events: &record.Events{}},
				},
				Missing: []string{"memory.peak", "memory.pressure", "4f1c0bd2e3a4/memory.peak", "4f1c0bd2e3a4/memory.pressure"}},
		},
		{
			name: "a v1 pod counts its containers' OOM kills, which v1 keeps in the victim's cgroup",
			tree: "v1-cgroupfs",
			want: record.Line{Cgroup: V1,
				Pod: record.Memory{Current: u64(225280), Peak: u64(67108864), Limit: u64(67108864), Failcnt: u64(129), Anon: u64(0),
					UnderOOM: flag(false), Events: &record.Events{OOMKill: 1}},
				Containers: map[string]record.Memory{
					ctr1: {Current: u64(212992), Peak: u64(67358720), Failcnt: u64(0), Anon: u64(0), UnderOOM: flag(false), Events: &record.Events{OOMKill: 1}},
					ctr2: {Current: u64(12288), Peak: u64(1204224), Failcnt: u64(0), Anon: u64(12288), UnderOOM: flag(false), Events: &record.Events{}},
				}},
		},
		{
			name:  "a v1 container's OOM kill stays counted, under its id, after the runtime removes its cgroup",
			tree:  "v1-cgroupfs",
			reads: 2,
			edit: func(t *testing.T, root string) {
				require.NoError(t, os.RemoveAll(filepath.Join(root, "memory/kubepods/burstable/pod"+podUID, ctr1)))
			},
			want: record.Line{Cgroup: V1,
				Pod: record.Memory{Current: u64(225280), Peak: u64(67108864), Limit: u64(67108864), Failcnt: u64(129), Anon: u64(0),
					UnderOOM: flag(false), Events: &record.Events{OOMKill: 1}},
				Containers: map[string]record.Memory{
					ctr2: {Current: u64(12288), Peak: u64(1204224), Failcnt: u64(0), Anon: u64(12288), UnderOOM: flag(false), Events: &record.Events{}},
				},
				GoneOOMKills: map[string]uint64{ctr1: 1}},
		},
		{
			name: "a v1 pod whose memory.oom_control is gone reads as missing while its containers read",
			tree: "v1-cgroupfs",
			edit: func(t *testing.T, root string) {
				require.NoError(t, os.Remove(filepath.Join(root, "memory/kubepods/burstable/pod"+podUID, "memory.oom_control")))
			},
			want: record.Line{Cgroup: V1,
				Containers: map[string]record.Memory{
					ctr1: {Current: u64(212992), Peak: u64(67358720), Failcnt: u64(0), Anon: u64(0), UnderOOM: flag(false), Events: &record.Events{OOMKill: 1}},
					ctr2: {Current: u64(12288), Peak: u64(1204224), Failcnt: u64(0), Anon: u64(12288), UnderOOM: flag(false), Events: &record.Events{}},
				},
				Missing: []string{"memory.oom_control"}},
		},
		{
			name: "a v2 container whose memory.events is gone reads without events",
			tree: "v2-cgroupfs",
			edit: func(t *testing.T, root string) {
				require.NoError(t, os.Remove(filepath.Join(root, "kubepods/burstable/pod"+podUID, ctr2, "memory.events")))
				require.NoError(t, os.Remove(filepath.Join(root, "kubepods/burstable/pod"+podUID, ctr1)+"/memory.stat"))
			},
			want: record.Line{Cgroup: V2,
				Pod: record.Memory{Current: u64(12288), Peak: u64(52428800), Limit: u64(52428800),
					Events: &record.Events{Max: 35, OOM: 1, OOMKill: 1}, Pressure: psi(0.54, 99462)},
				Containers: map[string]record.Memory{
					ctr1: {Events: &record.Events{OOMKill: 1}},
					ctr2: {Current: u64(552960), Peak: u64(712704), Pressure: psi(0, 0)},
				},
				Missing: []string{"4f1c0bd2e3a4/memory.stat", "9ab0c1d2e3f4/memory.events"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := copyTree(t, tc.tree)
			p := NewPod(Options{Root: root, PodUID: podUID})
			for range tc.reads - 1 {
				p.Read()
			}
			if tc.edit != nil {
				tc.edit(t, root)
			}
			got := p.Read()
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestPodReadLogsOnce(t *testing.T) {
	t.Run("a pod cgroup that appears late is retried and each missing file is logged once", func(t *testing.T) {
		root := copyTree(t, "v2-systemd-nopeak")
		var logs bytes.Buffer
		p := NewPod(Options{Root: root, PodUID: other, Log: slog.New(slog.NewTextHandler(&logs, nil))})

		for range 3 {
			assert.Equal(t, record.Line{Missing: []string{"cgroup"}}, p.Read())
		}
		require.NoError(t, os.MkdirAll(filepath.Join(root, "kubepods.slice/kubepods-pod"+strings.ReplaceAll(other, "-", "_")+".slice"), 0o755))
		for range 3 {
			got := p.Read()
			assert.Equal(t, V2, got.Cgroup)
			assert.Equal(t, []string{"memory.stat", "memory.current", "memory.max", "memory.peak", "memory.events", "memory.pressure"}, got.Missing)
		}

		lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
		require.Len(t, lines, 3, logs.String())
		assert.Contains(t, lines[0], "pod cgroup not found")
		assert.Contains(t, lines[1], "pod cgroup found")
		assert.Contains(t, lines[2], "files=\"[memory.stat memory.current memory.max memory.peak memory.events memory.pressure]\"")
	})
}
