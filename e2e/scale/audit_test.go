package scale

import (
	"bufio"
	"encoding/json"
	"os"
	"sort"
	"strings"
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
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	Received       time.Time `json:"requestReceivedTimestamp"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// requestCounts counts runnerguard's requests (the only ones the audit
// policy logs) received in [from, to), by "verb resource[/subresource]".
// A watch logs when it starts and when it ends: each request counts once.
func requestCounts(path string, from, to time.Time) (map[string]int, error) {
	out := map[string]int{}
	err := eachRequest(path, from, to, func(e auditEvent) {
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
	})
	return out, err
}

// eachRequest calls f once for each request in the audit log received in
// [from, to).
func eachRequest(path string, from, to time.Time, f func(auditEvent)) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e auditEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil || seen[e.AuditID] || e.Received.Before(from) || !e.Received.Before(to) {
			continue
		}
		seen[e.AuditID] = true
		f(e)
	}
	return sc.Err()
}

// requestsByPod counts the requests in [from, to) that name one pod: its
// Events and RunnerDeaths (named "<pod>.<suffix>"), its RunnerDeletion
// (named by its UID, which uids maps to "namespace/pod") and reads or
// patches of the pod itself, but not retention's deletes of its records;
// keyed "namespace/pod". The second map lists the writes among them that
// the API server took, each as its verb and resource.
func requestsByPod(path string, from, to time.Time, uids map[string]string) (map[string]int, map[string][]string, error) {
	out, writes := map[string]int{}, map[string][]string{}
	count := func(pod string, e auditEvent) {
		out[pod]++
		// A new leader's create of a record its predecessor wrote just
		// before it was killed (AlreadyExists) is a request, not a write.
		if isWrite(e.Verb) && e.took() {
			w := e.Verb + " " + e.ObjectRef.Resource
			if e.ObjectRef.Subresource != "" {
				w += "/" + e.ObjectRef.Subresource
			}
			writes[pod] = append(writes[pod], w)
		}
	}
	err := eachRequest(path, from, to, func(e auditEvent) {
		r := e.ObjectRef
		if r == nil || r.Name == "" || r.Namespace == "" {
			return
		}
		switch r.Resource {
		case "runnerdeletions":
			if pod, ok := uids[r.Name]; ok {
				count(pod, e)
			}
		case "events", "runnerdeaths", "pods":
			if r.Resource == "runnerdeaths" && e.Verb == "delete" {
				// Retention's, not the runner's life: the smoke keeps 5
				// records a namespace, and whether it removes a clean
				// exit's record before the window closes is timing. The
				// run's table counts it.
				return
			}
			name, _, _ := strings.Cut(r.Name, ".")
			count(r.Namespace+"/"+name, e)
		}
	})
	return out, writes, err
}

// isWrite says whether an audited verb changes what it names.
func isWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// took says whether the API server carried the request out: a write it
// refused (AlreadyExists, a conflict, a denial) changed nothing.
func (e auditEvent) took() bool { return e.ResponseStatus != nil && e.ResponseStatus.Code < 300 }

// budgetWrites counts runnerguard's PodDisruptionBudget creates in [from,
// to) by namespace, and its deletes: those that made or removed one (a
// create answered AlreadyExists, a worker's whose cache did not show the
// budget another had just made, makes none).
func budgetWrites(path string, from, to time.Time) (map[string]int, int, error) {
	creates, deletes := map[string]int{}, 0
	err := eachRequest(path, from, to, func(e auditEvent) {
		if r := e.ObjectRef; r != nil && r.Resource == "poddisruptionbudgets" && e.took() {
			switch e.Verb {
			case "create":
				creates[r.Namespace]++
			case "delete":
				deletes++
			}
		}
	})
	return creates, deletes, err
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
