package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/runnerguard/runnerguard/internal/version"
)

func TestPrintVersion(t *testing.T) {
	var out bytes.Buffer
	if err := printVersion(&out); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), version.String()+"\n"; got != want {
		t.Errorf("printVersion wrote %q, want %q", got, want)
	}
}

func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	if err := registerBuildInfo(reg); err != nil {
		t.Fatal(err)
	}
	want := `# HELP runnerguard_build_info Always 1; the labels name the running build.
# TYPE runnerguard_build_info gauge
runnerguard_build_info{commit="` + version.Current().Commit + `",goversion="` + runtime.Version() + `",version="` + version.Current().Version + `"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "runnerguard_build_info"); err != nil {
		t.Error(err)
	}
}
