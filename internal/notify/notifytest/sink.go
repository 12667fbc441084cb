package notifytest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/runnerguard/runnerguard/internal/notify"
)

// Sink is a CloudEvents receiver over HTTP (structured mode) that checks
// the Standard Webhooks signature with its key.
type Sink struct {
	*httptest.Server
	Key  []byte
	Fail func(r *http.Request) (int, http.Header)

	mu     sync.Mutex
	events []map[string]any
	errs   []string
}

// NewSink starts the receiver.
func NewSink(key []byte) *Sink {
	s := &Sink{Key: key}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Events are the events received, as JSON objects.
func (s *Sink) Events() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.events...)
}

// Errors are the requests refused for their shape or signature.
func (s *Sink) Errors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.errs...)
}

func (s *Sink) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Fail != nil {
		if code, h := s.Fail(r); code != 0 {
			for k, v := range h {
				w.Header()[k] = v
			}
			w.WriteHeader(code)
			return
		}
	}
	body, _ := io.ReadAll(r.Body)
	id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
	var e map[string]any
	switch {
	case r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/cloudevents+json":
		s.errs = append(s.errs, "not a structured CloudEvent POST: "+r.Method+" "+r.Header.Get("Content-Type"))
	case r.Header.Get("webhook-signature") != "v1,"+notify.Sign(s.Key, id, ts, body):
		s.errs = append(s.errs, "bad signature")
	case json.Unmarshal(body, &e) != nil || e["specversion"] != "1.0" || e["id"] != id:
		s.errs = append(s.errs, "not a CloudEvent 1.0 whose id is the webhook-id")
	default:
		s.events = append(s.events, e)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.WriteHeader(http.StatusUnauthorized)
}
