// Package version holds what the release build stamps into the binaries
// with -ldflags -X (hack/image.sh): the release version, the git commit and
// the build date. A build without them (go build, go install) takes what
// the Go toolchain recorded in the binary's build info instead.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set by -ldflags "-X github.com/runnerguard/runnerguard/internal/version.Version=..."
// and likewise Commit and Date; they are variables, not constants, for that.
var (
	// Version is the release, the chart's appVersion (e.g. 0.1.0).
	Version = unset
	// Commit is the git commit the binary was built from, with "-dirty"
	// when the tree had uncommitted changes.
	Commit = "unknown"
	// Date is the build date, RFC 3339 in UTC: the commit's time, so the
	// same commit builds the same bytes.
	Date = "unknown"
)

// unset is Version when no -ldflags stamped it.
const unset = "dev"

// Build is what a binary says it was built from.
type Build struct {
	Version, Commit, Date string
}

// Current is the stamped build, or, where nothing was stamped, what the Go
// toolchain recorded.
func Current() Build {
	return resolve(Build{Version: Version, Commit: Commit, Date: Date}, debug.ReadBuildInfo)
}

// resolve fills what the ldflags left unset from the build info: the main
// module's version (a tag for `go install module@tag`, a pseudo-version or
// "(devel)" for a build in a clone), vcs.revision with "-dirty" when
// vcs.modified, and vcs.time. A stamped field always wins: a release says
// exactly what its build script stamped.
func resolve(stamped Build, read func() (*debug.BuildInfo, bool)) Build {
	if stamped.Version != unset {
		return stamped
	}
	info, ok := read()
	if !ok {
		return stamped
	}
	b := stamped
	if v := info.Main.Version; v != "" && v != "(devel)" {
		b.Version = strings.TrimPrefix(v, "v")
	}
	vcs := map[string]string{}
	for _, s := range info.Settings {
		vcs[s.Key] = s.Value
	}
	if rev := vcs["vcs.revision"]; rev != "" && stamped.Commit == "unknown" {
		b.Commit = rev
		if vcs["vcs.modified"] == "true" {
			b.Commit += "-dirty"
		}
	}
	if t := vcs["vcs.time"]; t != "" && stamped.Date == "unknown" {
		b.Date = t
	}
	return b
}

// String is the one line `runnerguard version` prints.
func String() string {
	b := Current()
	return fmt.Sprintf("runnerguard %s (commit %s, built %s, %s, %s/%s)",
		b.Version, b.Commit, b.Date, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
