package notify

import (
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// The reporter is the one writer of these.
var (
	reportsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runnerguard_reports_total",
		Help: "Reports of runner deaths by destination kind (github, gitlab, sink) and the phase each attempt or skip left them in (Sent, Retrying, Failed, Skipped).",
	}, []string{"destination", "phase"})
	failuresTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runnerguard_report_failures_total",
		Help: "Failed report attempts by destination kind and the service's answer (4xx, 403, 429, 5xx, or none: no answer came).",
	}, []string{"destination", "status"})
)

// RegisterMetrics registers the reporter's metrics.
func RegisterMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{reportsTotal, failuresTotal} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// kind is a destination's kind: a sink's name stays off the metric.
func kind(destination string) string {
	if strings.HasPrefix(destination, sinkPrefix) {
		return "sink"
	}
	return destination
}

func statusClass(code int) string {
	switch {
	case code == 0:
		return "none"
	case code == 403 || code == 429:
		return strconv.Itoa(code)
	case code >= 500:
		return "5xx"
	}
	return "4xx"
}
