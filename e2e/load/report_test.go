//go:build load

package load

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what the run measured, printed as one table at its end.
type Report struct {
	LoadBefore, LoadAfter string
	Rounds                int
	Latencies             []Latency
	Saturations           []Saturation
	// Notes are facts the run observed, printed under the table.
	Notes []string
}

// Latency is one setup's timed operations through the API server.
type Latency struct {
	Op, Setup string
	Samples   []time.Duration
	// Reviews are the webhook's reviews of the operation; nil when no
	// webhook of runnerguard's is involved.
	Reviews *Reviews
	// Base is the setup of the same Op this one is compared with; empty
	// for a baseline.
	Base string
}

// Saturation is one step of the webhook server alone.
type Saturation struct {
	What              string
	Workers, Requests int
	Errors            int
	Elapsed           time.Duration
	Latency           []time.Duration
	// CPUPerReview is the server's CPU time per review, from /proc;
	// ClientCPUPerReview the load generator's, sharing the same CPUs.
	CPUPerReview, ClientCPUPerReview time.Duration
}

// AddLatency records the samples of op under setup, compared with the
// setup base of the same op ("" for a baseline).
func (r *Report) AddLatency(op, setup string, samples []time.Duration, reviews *Reviews, base string) {
	r.Latencies = append(r.Latencies, Latency{Op: op, Setup: setup, Samples: samples, Reviews: reviews, Base: base})
}

// percentile is the nearest-rank percentile p (0..1) of d.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(i, 0)]
}

// p50Added is how much the p50 of d exceeds the p50 of base, in ms.
func p50Added(d, base []time.Duration) string {
	return fmt.Sprintf("%+.2f ms", float64(percentile(d, 0.5)-percentile(base, 0.5))/float64(time.Millisecond))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// loadAvg is the machine's load average, as uptime prints it.
func loadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	return strings.Join(f[:3], " ")
}

// Print writes the table.
func (r *Report) Print(out io.Writer) {
	fmt.Fprintf(out, "\n==== runnerguard: what it costs (make bench, %s) ====\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(out, "machine: %d CPUs, %s; load average (1, 5, 15 min) %s at start, %s at end\n",
		runtime.NumCPU(), runtime.GOARCH, r.LoadBefore, r.LoadAfter)
	printMicro(out)
	r.printLatency(out)
	r.printSaturation(out)
	printVitals(out)
	for _, n := range r.Notes {
		fmt.Fprintln(out, "note:", n)
	}
}

func (r *Report) printLatency(out io.Writer) {
	if len(r.Latencies) == 0 {
		return
	}
	fmt.Fprintf(out, "\n-- Through kube-apiserver v1.37.2 (envtest, the real binary): %d sequential requests per row, setups interleaved round by round --\n", r.Rounds)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "operation\tadmission\tp50\tp99\tp50 added\tp50 ratio\twebhook calls/op\tserver time/review\trunnerguard's API requests/review\t")
	p50s := map[[2]string]time.Duration{}
	for _, l := range r.Latencies {
		p50s[[2]string{l.Op, l.Setup}] = percentile(l.Samples, 0.5)
	}
	var guard, vap time.Duration
	for _, l := range r.Latencies {
		p50 := percentile(l.Samples, 0.5)
		calls, handling, requests := "-", "-", "-"
		if l.Reviews != nil {
			calls = fmt.Sprintf("%.2f", l.Reviews.PerOp)
			if l.Reviews.PerOp > 0 {
				handling = ms(l.Reviews.Handling)
				requests = requestsText(l.Reviews.Requests)
			}
		}
		added, ratio := "-", "-"
		if b := p50s[[2]string{l.Op, l.Base}]; b > 0 && l.Base != "" {
			added = fmt.Sprintf("%+.2f ms", float64(p50-b)/float64(time.Millisecond))
			ratio = fmt.Sprintf("%.2fx", float64(p50)/float64(b))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", l.Op, l.Setup, ms(p50), ms(percentile(l.Samples, 0.99)), added, ratio, calls, handling, requests)
		switch {
		case l.Op != "pod DELETE":
		case l.Setup == "runnerguard guard":
			guard = p50
		case l.Setup == "ValidatingAdmissionPolicy":
			vap = p50
		}
	}
	_ = tw.Flush()
	if guard > 0 && vap > 0 {
		fmt.Fprintf(out, "pod DELETE: guard p50 / ValidatingAdmissionPolicy p50 = %.2fx\n", float64(guard)/float64(vap))
	}
}

// requestsText names the API requests per review, most first: "none" for
// none, "-" where they were not counted.
func requestsText(perReview map[string]float64) string {
	if perReview == nil {
		return "-"
	}
	if len(perReview) == 0 {
		return "none"
	}
	names := slices.Collect(maps.Keys(perReview))
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(perReview[b], perReview[a]), strings.Compare(a, b))
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %.2f", n, perReview[n])
	}
	return strings.Join(parts, ", ")
}

func (r *Report) printSaturation(out io.Writer) {
	if len(r.Saturations) == 0 {
		return
	}
	fmt.Fprintf(out, "\n-- Webhook server alone: AdmissionReviews over HTTPS/2 on loopback, %d requests or %s per step; the client shares the CPUs --\n", stepRequests, stepDuration)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "review\tclients\treviews/s\tp50\tp99\terrors\tserver CPU/review\tclient CPU/review\tCPUs/server CPU\t")
	us := func(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }
	for _, s := range r.Saturations {
		cpu, capacity := "-", "-"
		if s.CPUPerReview > 0 {
			cpu = us(s.CPUPerReview)
			capacity = fmt.Sprintf("%.0f/s", float64(runtime.NumCPU())*float64(time.Second)/float64(s.CPUPerReview))
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\t%d\t%s\t%s\t%s\t\n", s.What, s.Workers, float64(s.Requests)/s.Elapsed.Seconds(),
			ms(percentile(s.Latency, 0.5)), ms(percentile(s.Latency, 0.99)), s.Errors, cpu, us(s.ClientCPUPerReview), capacity)
	}
	_ = tw.Flush()
}
