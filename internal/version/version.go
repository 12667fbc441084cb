// Package version holds what the release build stamps into the binaries
// with -ldflags -X (hack/image.sh): the release version, the git commit and
// the build date. A plain `go build` leaves the defaults.
package version

import (
	"fmt"
	"runtime"
)

// Set by -ldflags "-X github.com/runnerguard/runnerguard/internal/version.Version=..."
// and likewise Commit and Date; they are variables, not constants, for that.
var (
	// Version is the release, the chart's appVersion (e.g. 0.1.0).
	Version = "dev"
	// Commit is the git commit the binary was built from, with "-dirty"
	// when the tree had uncommitted changes.
	Commit = "unknown"
	// Date is the build date, RFC 3339 in UTC: the commit's time, so the
	// same commit builds the same bytes.
	Date = "unknown"
)

// String is the one line `runnerguard version` prints.
func String() string {
	return fmt.Sprintf("runnerguard %s (commit %s, built %s, %s, %s/%s)",
		Version, Commit, Date, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
