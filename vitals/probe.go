package vitals

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/runnerguard/runnerguard/vitals/record"
)

// ProbePath is the path the kubelet's readiness probe asks.
const ProbePath = record.ProbePath

// Probe answers the kubelet's readiness probe of the sidecar: ready unless
// a stall at the memory limit is under way. The kubelet writes the answer
// into the pod's status (the container's ready flag), where the leader's
// pod watch sees it: the pod writes nothing and needs no API access, and
// nobody but the kubelet writes that status.
type Probe struct{ stall atomic.Pointer[record.Stall] }

// set keeps the stall a line carries, or none once it ended.
func (p *Probe) set(s *record.Stall) {
	if s != nil && s.Ended != nil {
		s = nil
	}
	p.stall.Store(s)
}

// ServeHTTP answers 200 while no stall is under way, else 503 with when it
// began (the kubelet puts the body in its Unhealthy Event).
func (p *Probe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != ProbePath {
		http.NotFound(w, r)
		return
	}
	s := p.stall.Load()
	if s == nil {
		fmt.Fprintln(w, "ok")
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprintf(w, "stalled at the memory limit since %s (%s)\n", s.Began.UTC().Format(time.RFC3339), s.Basis)
}
