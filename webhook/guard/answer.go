package guard

import (
	"bytes"
	"net/http"
	"strconv"
	"time"
)

// The answer on the wire: when it is due, and how it is sent whole before
// the work after it starts (Serve, after.go).

// AnswerDue is how long after a review arrives its answer is due. The
// API server waits timeout for it (its webhook call's timeout query
// parameter, the registration's timeoutSeconds; ifAbsent for a review
// posted without one), at most 30 s, longer claims being someone else's.
// Half of it, at most 2.5 s, is left for the answer, even a refusal for
// now, to reach the API server from a loaded machine before it gives up
// and applies the failure policy. The webhook server's wait for a
// review's budget and the guard's reads share this one deadline.
func AnswerDue(timeout string, ifAbsent time.Duration) time.Duration {
	d, err := time.ParseDuration(timeout)
	if err != nil || d <= 0 {
		d = ifAbsent
	}
	d = min(d, 30*time.Second)
	return d - min(d/2, 2500*time.Millisecond)
}

// heldAnswer holds an answer's status and body until send. Its headers are
// the ResponseWriter's own.
type heldAnswer struct {
	http.ResponseWriter
	code int
	body bytes.Buffer
}

func (h *heldAnswer) WriteHeader(code int) { h.code = code }

func (h *heldAnswer) Write(b []byte) (int, error) { return h.body.Write(b) }

// send writes the answer with its length, in one write, and flushes it. A
// write that fails is the caller's gone: nothing to tell it.
func (h *heldAnswer) send() {
	h.Header().Set("Content-Length", strconv.Itoa(h.body.Len()))
	h.ResponseWriter.WriteHeader(h.code)
	_, _ = h.ResponseWriter.Write(h.body.Bytes())
	_ = http.NewResponseController(h.ResponseWriter).Flush()
}
