package cgroup

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseOOMControl(t *testing.T) {
	cases := []struct {
		name, in, wantErr string
		want              oomControl
	}{
		{name: "a kernel's file after an OOM kill reads its counter",
			in: "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n", want: oomControl{Kill: 1, HasKill: true}},
		{name: "a cgroup stuck at its limit with the OOM killer off reads as such",
			in: "oom_kill_disable 1\nunder_oom 1\noom_kill 0\n", want: oomControl{KillDisable: true, UnderOOM: true, HasKill: true}},
		{name: "a kernel before 4.13 counts no kills", in: "oom_kill_disable 0\nunder_oom 0\n"},
		{name: "a key a newer kernel adds is skipped",
			in: "oom_kill_disable 0\nunder_oom 0\noom_kill 3\noom_future 9\n", want: oomControl{Kill: 3, HasKill: true}},
		{name: "a line without a value is refused", in: "oom_kill\n", wantErr: "malformed line"},
		{name: "a value that is no number is refused", in: "oom_kill -1\n", wantErr: "oom_kill"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseOOMControl([]byte(tc.in))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// FuzzParseOOMControl: any input parses or errs without panicking, and the
// kernel's layout of any values reads back as them.
func FuzzParseOOMControl(f *testing.F) {
	f.Add([]byte("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"), uint64(1), true)
	f.Add([]byte("oom_kill 18446744073709551615"), uint64(1)<<63, false)
	f.Add([]byte("\n\n \x00"), uint64(0), false)
	f.Fuzz(func(t *testing.T, in []byte, kill uint64, under bool) {
		_, _ = parseOOMControl(in)
		u := 0
		if under {
			u = 1
		}
		got, err := parseOOMControl(fmt.Appendf(nil, "oom_kill_disable 0\nunder_oom %d\noom_kill %d\n", u, kill))
		require.NoError(t, err)
		require.Equal(t, oomControl{UnderOOM: under, Kill: kill, HasKill: true}, got)
	})
}
