package version

import (
	"runtime"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	old := [3]string{Version, Commit, Date}
	t.Cleanup(func() { Version, Commit, Date = old[0], old[1], old[2] })
	Version, Commit, Date = "1.2.3", "abc123", "2026-01-02T03:04:05Z"
	got := String()
	for _, want := range []string{"runnerguard 1.2.3", "commit abc123", "built 2026-01-02T03:04:05Z", runtime.Version(), runtime.GOARCH} {
		if !strings.Contains(got, want) {
			t.Errorf("String() = %q, lacks %q", got, want)
		}
	}
}
