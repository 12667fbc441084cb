//go:build load

package load

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// bench is one benchmark's runs from `go test -bench` output.
type bench struct {
	name                   string
	ns, cpu, bytes, allocs []float64
}

// readBenchmarks parses `go test -bench -benchmem` output: each result
// line is the name, the iteration count, then value and unit pairs. Names
// are prefixed with the last directory of their package.
func readBenchmarks(r io.Reader) []*bench {
	var out []*bench
	byName := map[string]*bench{}
	pkg := ""
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "pkg:" {
			pkg = f[1][strings.LastIndexByte(f[1], '/')+1:]
			continue
		}
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := pkg + " " + strings.TrimPrefix(f[0], "Benchmark")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i] // the GOMAXPROCS suffix
		}
		b := byName[name]
		if b == nil {
			b = &bench{name: name}
			byName[name] = b
			out = append(out, b)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/op":
				b.ns = append(b.ns, v)
			case "cpu-ns/op":
				b.cpu = append(b.cpu, v)
			case "B/op":
				b.bytes = append(b.bytes, v)
			case "allocs/op":
				b.allocs = append(b.allocs, v)
			}
		}
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// printMicro prints the handler benchmarks of the file LOAD_MICRO names.
func printMicro(out io.Writer) {
	path := os.Getenv("LOAD_MICRO")
	if path == "" {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintf(out, "\n(handler benchmarks: %v)\n", err)
		return
	}
	defer f.Close()
	benches := readBenchmarks(f)
	runs := 0
	if len(benches) > 0 {
		runs = len(benches[0].ns)
	}
	fmt.Fprintf(out, "\n-- Handler in process (go test -bench, median of %d runs; ServeHTTP = decode + decide/mutate + encode through admission.Webhook; CPU/op = the process's CPU time per op) --\n", runs)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "benchmark\ttime/op\tCPU/op\tB/op\tallocs/op\t")
	for _, b := range benches {
		cpu := "-"
		if len(b.cpu) > 0 {
			cpu = duration(median(b.cpu))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%.0f\t\n", b.name, duration(median(b.ns)), cpu, median(b.bytes), median(b.allocs))
	}
	_ = tw.Flush()
}

func duration(ns float64) string {
	if ns >= 1000 {
		return fmt.Sprintf("%.1f µs", ns/1000)
	}
	return fmt.Sprintf("%.0f ns", ns)
}

// vitalsFigures are the lines of `make vitals-v1` output worth a row.
var vitalsFigures = []string{"sidecar RSS:", "sidecar CPU while idle", "OOM kill to line:", "SIGTERM to exit:"}

// printVitals prints the vitals sidecar's figures from the `make
// vitals-v1` output in the file LOAD_VITALS names.
func printVitals(out io.Writer) {
	path := os.Getenv("LOAD_VITALS")
	if path == "" {
		return
	}
	fmt.Fprintln(out, "\n-- Vitals sidecar (make vitals-v1: the built binary on this machine's cgroup v1, a container OOM-killed) --")
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintf(out, "not measured: %v\n", err)
		return
	}
	defer f.Close()
	found := false
	var benchLines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "Benchmark") || strings.HasPrefix(line, "pkg:") {
			benchLines = append(benchLines, line)
			continue
		}
		for _, fig := range vitalsFigures {
			if i := strings.Index(line, fig); i >= 0 {
				fmt.Fprintln(out, line[i:])
				found = true
			}
		}
	}
	for _, b := range readBenchmarks(strings.NewReader(strings.Join(benchLines, "\n"))) {
		fmt.Fprintf(out, "per sample, %s: %s, %.0f allocs\n", b.name, duration(median(b.ns)), median(b.allocs))
		found = true
	}
	if !found {
		fmt.Fprintln(out, "no figures in its output (it needs root and a cgroup v1 memory hierarchy; see docs/development/README.md)")
	}
}
