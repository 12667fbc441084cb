package apitest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"

	"github.com/runnerguard/runnerguard/e2e/internal/registration"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/webhook/guard"
)

// WebhookCalls is the number of reviews the server has answered on path,
// from controller-runtime's own request counter.
func (s *Server) WebhookCalls(path string) (float64, error) {
	calls, _, err := s.WebhookStats(path)
	return calls, err
}

// WebhookStats is the number of reviews the server has answered on path
// and the seconds it spent answering them, from controller-runtime's own
// controller_runtime_webhook_requests_total and _latency_seconds. The
// guard's path counts with the paths of its modes (guard.ModePath), which
// the chart's registrations call.
func (s *Server) WebhookStats(path string) (calls, seconds float64, err error) {
	m, err := s.Scrape()
	if err != nil {
		return 0, 0, err
	}
	served := func(labels map[string]string) bool { return OnPath(labels["webhook"], path) }
	calls, _ = m.SumWhere("controller_runtime_webhook_requests_total", served)
	seconds, _ = m.SumWhere("controller_runtime_webhook_latency_seconds", served)
	return calls, seconds, nil
}

// OnPath reports whether a review served at served counts for path: the
// same path, or for the guard's and its exec and attach review's, one of
// their modes'.
func OnPath(served, path string) bool {
	if served == path {
		return true
	}
	switch path {
	case registration.GuardPath:
		return served == guard.ModePath(config.ModeEnforce) || served == guard.ModePath(config.ModeWarn)
	case registration.ConnectPath:
		return served == guard.ConnectModePath(config.ModeEnforce) || served == guard.ConnectModePath(config.ModeWarn)
	}
	return false
}

// LogLines returns the server's JSON log lines whose msg is msg.
func (s *Server) LogLines(msg string) ([]map[string]any, error) {
	raw, err := os.ReadFile(s.LogPath)
	if err != nil {
		return nil, err
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(msg)) {
			continue
		}
		var m map[string]any
		if json.Unmarshal(line, &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out, nil
}
