package record_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runnerguard/runnerguard/vitals/record"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func u64(v uint64) *uint64 { return &v }

var at = time.Date(2025, 11, 22, 23, 36, 1, 250_000_000, time.UTC)

// v2Line is a reading as the v2 reader makes it: a limited pod with an OOM
// kill in one container, PSI, and one container whose peak is observed.
func v2Line() record.Line {
	return record.Line{
		V: record.Version, Time: at, Trigger: record.TriggerOOM, Cgroup: "v2",
		Pod: record.Memory{
			Current: u64(1_376_256), Peak: u64(52_428_800), Limit: u64(52_428_800),
			Events:   &record.Events{Max: 35, OOM: 1, OOMKill: 1},
			Pressure: &record.Pressure{SomeAvg10: 1.25, SomeTotal: 23_614, FullAvg10: 0.5, FullTotal: 20_101},
		},
		Containers: map[string]record.Memory{
			"4f1c": {Current: u64(4096), Peak: u64(52_400_128), Events: &record.Events{Max: 35, OOM: 1, OOMKill: 1}},
			"9ab0": {Current: u64(8192), Peak: u64(8192), PeakObserved: true},
		},
		Missing: []string{"9ab0/memory.peak"},
		Stall:   &record.Stall{Began: at.Add(-9 * time.Minute), WorstFull: &worst, Basis: "pressure", Container: "4f1c"},
	}
}

var worst = 97.5

// v1Line is a reading as the v1 reader makes it: no PSI, failcnt and
// under_oom instead, and the pod cgroup not limited.
func v1Line() record.Line {
	no := false
	return record.Line{
		V: record.Version, Time: at, Trigger: record.TriggerInterval, Cgroup: "v1",
		Pod: record.Memory{
			Current: u64(212_992), Peak: u64(67_108_864), Failcnt: u64(126), Anon: u64(8192), UnderOOM: &no,
			Events: &record.Events{OOMKill: 1},
		},
	}
}

func TestGolden(t *testing.T) {
	noCgroup := record.Line{V: record.Version, Time: at, Trigger: record.TriggerStart, Missing: []string{"cgroup"}}
	cases := map[string]any{
		"line-v2":        v2Line(),
		"line-v1":        v1Line(),
		"line-no-cgroup": noCgroup,
		"final-v2":       v2Line().Final(),
		"final-v1":       v1Line().Final(),
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			var got bytes.Buffer
			if l, ok := v.(record.Line); ok {
				require.NoError(t, record.WriteLine(&got, l))
			} else {
				b, err := record.EncodeFinal(v.(record.Final))
				require.NoError(t, err)
				got.Write(append(b, '\n'))
			}
			path := filepath.Join("testdata", name+".golden.json")
			if *update {
				require.NoError(t, os.WriteFile(path, got.Bytes(), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run go test ./vitals/record -update to create it")
			assert.Equal(t, string(want), got.String())
		})
	}
}

func TestWriteLine(t *testing.T) {
	t.Run("a line is one JSON object ending in a newline and reads back equal", func(t *testing.T) {
		var buf bytes.Buffer
		require.NoError(t, record.WriteLine(&buf, v2Line()))
		require.Equal(t, 1, strings.Count(buf.String(), "\n"))
		var back record.Line
		require.NoError(t, json.Unmarshal(buf.Bytes(), &back))
		assert.Equal(t, v2Line(), back)
	})
}

func TestEncodeFinal(t *testing.T) {
	manyContainers := v2Line()
	manyContainers.Missing = nil
	for i := range 400 {
		manyContainers.Missing = append(manyContainers.Missing,
			fmt.Sprintf("%012x/memory.peak", i), fmt.Sprintf("%012x/memory.pressure", i))
	}
	cases := []struct {
		name        string
		line        record.Line
		wantMissing []string
	}{
		{name: "a small reading keeps its missing list", line: v2Line(), wantMissing: []string{"9ab0/memory.peak"}},
		{
			name: "a pod of 400 containers with missing files is shortened under 4 KiB",
			line: manyContainers,
		},
		{
			name:        "one enormous missing name is dropped to fit",
			line:        record.Line{V: 1, Time: at, Cgroup: "v2", Missing: []string{strings.Repeat("x", 5000)}},
			wantMissing: []string{"..."},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := record.EncodeFinal(tc.line.Final())
			require.NoError(t, err)
			assert.LessOrEqual(t, len(b), record.MaxFinalBytes)
			got, err := record.ParseFinal(string(b))
			require.NoError(t, err)
			want := tc.line.Final()
			if tc.wantMissing != nil {
				want.Missing = tc.wantMissing
			} else {
				require.NotEmpty(t, got.Missing)
				assert.Equal(t, "...", got.Missing[len(got.Missing)-1], "a shortened list says so")
				assert.Equal(t, want.Missing[:len(got.Missing)-1], got.Missing[:len(got.Missing)-1])
				want.Missing = got.Missing
			}
			assert.Equal(t, want, got)
		})
	}
}

// FuzzEncodeFinal: whatever the missing list holds, the final reading fits
// in a termination message and reads back with its counters intact.
func FuzzEncodeFinal(f *testing.F) {
	f.Add("memory.peak", 3, uint64(1), uint64(52_428_800))
	f.Add(strings.Repeat("\u2028\"<>&", 300), 40, uint64(0), uint64(1)<<63)
	f.Add("", 1000, uint64(7), uint64(0))
	f.Fuzz(func(t *testing.T, name string, n int, kills, peak uint64) {
		n = min(max(n, 0), 2000)
		l := record.Line{V: 1, Time: at, Cgroup: "v1", Pod: record.Memory{Peak: &peak, Events: &record.Events{OOMKill: kills}}}
		for i := range n {
			l.Missing = append(l.Missing, fmt.Sprint(i, name))
		}
		b, err := record.EncodeFinal(l.Final())
		require.NoError(t, err)
		require.LessOrEqual(t, len(b), record.MaxFinalBytes)
		got, err := record.ParseFinal(string(b))
		require.NoError(t, err)
		assert.Equal(t, kills, got.OOMKill)
		assert.Equal(t, peak, *got.Peak)
	})
}

func TestEncodeFinalDropsTheContainersThatSawNoOOMFirst(t *testing.T) {
	u := func(n uint64) *uint64 { return &n }
	f := record.Final{V: 1, Time: at, Cgroup: "v1", OOMKill: 1, Containers: map[string]record.FinalMemory{}}
	for i := range 60 {
		f.Containers[fmt.Sprintf("%064x", i)] = record.FinalMemory{Peak: u(1 << 20), Limit: u(1 << 30)}
	}
	killed := fmt.Sprintf("%064x", 999)
	f.Containers[killed] = record.FinalMemory{Peak: u(96 << 20), Limit: u(96 << 20), OOMKill: 1, OOMKillAt: &at}
	b, err := record.EncodeFinal(f)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(b), record.MaxFinalBytes)
	got, err := record.ParseFinal(string(b))
	require.NoError(t, err)
	assert.Equal(t, map[string]record.FinalMemory{killed: f.Containers[killed]}, got.Containers, "the container that was killed stays")
	assert.Len(t, f.Containers, 61, "the caller's map is left alone")
}
