package main

import (
	"fmt"
	"io"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/runnerguard/runnerguard/internal/version"
)

// printVersion is `runnerguard version` and --version: the release, commit
// and build date stamped in at build time.
func printVersion(w io.Writer) error {
	_, err := fmt.Fprintln(w, version.String())
	return err
}

// versionInfo is `version -o json|yaml`.
type versionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	BuildDate string `json:"buildDate"`
	GoVersion string `json:"goVersion"`
}

func buildInfo() versionInfo {
	b := version.Current()
	return versionInfo{Version: b.Version, Commit: b.Commit, BuildDate: b.Date, GoVersion: runtime.Version()}
}

// registerBuildInfo adds runnerguard_build_info{version,commit,goversion} 1,
// so a dashboard can tell which build each replica runs.
func registerBuildInfo(reg prometheus.Registerer) error {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "runnerguard_build_info",
		Help: "Always 1; the labels name the running build.",
	}, []string{"version", "commit", "goversion"})
	b := version.Current()
	g.WithLabelValues(b.Version, b.Commit, runtime.Version()).Set(1)
	return reg.Register(g)
}
