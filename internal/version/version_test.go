package version

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
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

func TestResolve(t *testing.T) {
	unstamped := Build{Version: unset, Commit: "unknown", Date: "unknown"}
	info := func(version string, settings ...string) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/runnerguard/runnerguard", Version: version}}
			for i := 0; i+1 < len(settings); i += 2 {
				bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
			}
			return bi, true
		}
	}
	for name, tc := range map[string]struct {
		stamped Build
		read    func() (*debug.BuildInfo, bool)
		want    Build
	}{
		"a release build says what its build script stamped": {
			stamped: Build{Version: "0.1.0", Commit: "abc", Date: "2026-01-02T03:04:05Z"},
			read:    info("v9.9.9", "vcs.revision", "fff"),
			want:    Build{Version: "0.1.0", Commit: "abc", Date: "2026-01-02T03:04:05Z"},
		},
		"go install of a tag says the tag": {
			stamped: unstamped,
			read:    info("v0.2.0"),
			want:    Build{Version: "0.2.0", Commit: "unknown", Date: "unknown"},
		},
		"a build in a clean clone says its commit and the commit's time": {
			stamped: unstamped,
			read:    info("v0.0.0-20261127101010-0123456789ab", "vcs.revision", "0123456789abcdef", "vcs.time", "2026-11-27T10:10:10Z", "vcs.modified", "false"),
			want:    Build{Version: "0.0.0-20261127101010-0123456789ab", Commit: "0123456789abcdef", Date: "2026-11-27T10:10:10Z"},
		},
		"a build in a changed clone says its commit is dirty": {
			stamped: unstamped,
			read:    info("(devel)", "vcs.revision", "0123456789abcdef", "vcs.modified", "true"),
			want:    Build{Version: unset, Commit: "0123456789abcdef-dirty", Date: "unknown"},
		},
		"a build without build info keeps the defaults": {
			stamped: unstamped,
			read:    func() (*debug.BuildInfo, bool) { return nil, false },
			want:    unstamped,
		},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, resolve(tc.stamped, tc.read))
		})
	}
}
