package notifytest

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
)

// serveOn starts h on l, or on loopback when l is nil.
func serveOn(l net.Listener, h http.Handler) *httptest.Server {
	s := httptest.NewUnstartedServer(h)
	if l != nil {
		_ = s.Listener.Close()
		s.Listener = l
	}
	s.Start()
	return s
}

// service is what each fake service keeps alike: the requests it answered,
// those that broke the published shape, and the failures a test asks of it.
type service struct {
	// Fail, when set, answers a request instead (a status and headers).
	Fail func(r *http.Request) (int, http.Header)

	mu    sync.Mutex
	errs  []string
	calls int
	held  *held
}

// held is a report to hold once it is kept.
type held struct {
	match            func(*http.Request) bool
	arrived, release chan struct{}
	once             sync.Once
}

// Hold holds the first request match accepts once the report it carries
// is kept (it arrived), before the answer, until release: a client that
// stops meanwhile never hears that it arrived. arrived is closed when it
// did.
func (s *service) Hold(match func(*http.Request) bool) (arrived <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := &held{match: match, arrived: make(chan struct{}), release: make(chan struct{})}
	s.held = h
	return h.arrived, func() { h.once.Do(func() { close(h.release) }) }
}

// hold waits for the release when r is the request to hold. The caller
// holds mu, which is let go meanwhile so that other requests are answered.
func (s *service) hold(r *http.Request) {
	h := s.held
	if h == nil || !h.match(r) {
		return
	}
	s.held = nil
	close(h.arrived)
	s.mu.Unlock()
	<-h.release
	s.mu.Lock()
}

// Errors are the requests that broke the published shape.
func (s *service) Errors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.errs...)
}

// Calls counts the requests answered.
func (s *service) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// begin counts r and answers it with the failure Fail asks for, if any:
// true when it did. The caller holds mu.
func (s *service) begin(w http.ResponseWriter, r *http.Request) bool {
	s.calls++
	if s.Fail == nil {
		return false
	}
	code, h := s.Fail(r)
	if code == 0 {
		return false
	}
	for k, v := range h {
		w.Header()[k] = v
	}
	http.Error(w, `{"message":"fake failure"}`, code)
	return true
}

// broke keeps a request that broke the shape, and says how. The caller
// holds mu.
func (s *service) broke(format string, a ...any) string {
	msg := fmt.Sprintf(format, a...)
	s.errs = append(s.errs, msg)
	return msg
}
