package scale

import (
	"bufio"
	"encoding/json"
	"os"
	"sort"
	"time"
)

// auditEvent is the part of an audit.k8s.io/v1 Event the report reads.
type auditEvent struct {
	AuditID   string `json:"auditID"`
	Verb      string `json:"verb"`
	URI       string `json:"requestURI"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	Received time.Time `json:"requestReceivedTimestamp"`
}

// requestCounts counts runnerguard's requests (the only ones the audit
// policy logs) received in [from, to), by "verb resource[/subresource]".
// A watch logs when it starts and when it ends: each request counts once.
func requestCounts(path string, from, to time.Time) (map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	seen := map[string]bool{}
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e auditEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil || seen[e.AuditID] || e.Received.Before(from) || !e.Received.Before(to) {
			continue
		}
		seen[e.AuditID] = true
		key := e.Verb
		if r := e.ObjectRef; r != nil {
			key += " " + r.Resource
			if r.Subresource != "" {
				key += "/" + r.Subresource
			}
		} else {
			key += " " + e.URI // a non-resource request: discovery, version
		}
		out[key]++
	}
	return out, sc.Err()
}

// sortedKeys lists m's keys in order.
func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
