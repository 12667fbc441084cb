package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/webhook/guard"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"
)

func post(ctx context.Context, body io.Reader, length int64) *http.Request {
	return postTo(ctx, "/validate-runner-pod", body, length)
}

func postTo(ctx context.Context, target string, body io.Reader, length int64) *http.Request {
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, target, body)
	r.ContentLength = length
	return r
}

func TestAReviewOverTheLimitIsRefusedUnread(t *testing.T) {
	l := newReviewBudgets(16 << 20).forPath("/p")
	called := false
	h := l.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, post(context.Background(), strings.NewReader("{}"), maxReviewBytes+1))
	assert.Equal(t, http.StatusRequestEntityTooLarge, w.Code)
	assert.False(t, called)
}

func TestABodyWithoutALengthStopsAtTheLimit(t *testing.T) {
	l := newReviewBudgets(16 << 20).forPath("/p")
	var read int64
	var readErr error
	h := l.wrap(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		read, readErr = io.Copy(io.Discard, r.Body)
	}))
	h.ServeHTTP(httptest.NewRecorder(), post(context.Background(), bytes.NewReader(make([]byte, maxReviewBytes+10)), -1))
	var tooLarge *http.MaxBytesError
	assert.ErrorAs(t, readErr, &tooLarge)
	assert.Equal(t, int64(maxReviewBytes), read)
	assert.True(t, l.large.TryAcquire(maxReviewBytes), "its budget is given back")
}

// A path's budget bounds its ordinary reviews in flight: two of 1 MiB fill
// a budget of 2 MiB, a third waits until one is done, while the budget is
// charged per byte.
func TestAPathsBudgetBoundsItsReviewsInFlight(t *testing.T) {
	l := newReviewBudgets(2 * largeReviewBytes).forPath("/p")
	entered, release := make(chan struct{}), make(chan struct{})
	h := l.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		entered <- struct{}{}
		<-release
	}))
	done := make(chan struct{})
	for range 3 {
		go func() {
			h.ServeHTTP(httptest.NewRecorder(), post(context.Background(), bytes.NewReader(make([]byte, largeReviewBytes)), largeReviewBytes))
			done <- struct{}{}
		}()
	}
	<-entered
	<-entered
	require.False(t, l.budget.TryAcquire(1), "two reviews of 1 MiB take the whole budget")
	release <- struct{}{}
	<-done
	<-entered // the third gets in once one is done
	release <- struct{}{}
	release <- struct{}{}
	<-done
	<-done
	assert.True(t, l.budget.TryAcquire(2*largeReviewBytes), "everything is given back")
}

// The guard's path full of reviews, and the large reviews' budget held by
// one, an ordinary review to the injector's path goes straight in.
func TestAFloodOfAnotherPathDoesNotDelayTheInjector(t *testing.T) {
	b := newReviewBudgets(maxReviewBytes)
	guard, inject := b.forPath("/validate-runner-pod"), b.forPath("/mutate-runner-pod")
	require.True(t, guard.budget.TryAcquire(maxReviewBytes), "the guard's path is full")
	require.True(t, b.large.TryAcquire(maxReviewBytes), "a large review is in flight")
	called := false
	w := httptest.NewRecorder()
	inject.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })).
		ServeHTTP(w, postTo(context.Background(), "/mutate-runner-pod?timeout=5s", strings.NewReader("{}"), 30<<10))
	assert.True(t, called, "the injector's review was served")
	assert.Equal(t, http.StatusOK, w.Code)
}

// A large review waits for the one budget of large reviews, shared by
// every path, and is answered 503 once the API server would give up; the
// path's own budget is left to its ordinary reviews.
func TestALargeReviewWaitsForTheSharedBudgetAndFailsInTime(t *testing.T) {
	b := newReviewBudgets(maxReviewBytes)
	inject := b.forPath("/mutate-runner-pod")
	require.True(t, b.large.TryAcquire(maxReviewBytes), "a largest review to another path is in flight")
	w := httptest.NewRecorder()
	start := time.Now()
	inject.wrap(http.NotFoundHandler()).ServeHTTP(w, postTo(context.Background(), "/mutate-runner-pod?timeout=300ms", bytes.NewReader(make([]byte, 3<<20)), 3<<20))
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.Contains(t, w.Body.String(), "too many reviews in flight on large reviews")
	assert.Less(t, time.Since(start), maxBudgetWait, "refused within the API server's timeout, not after the longest wait")
	assert.True(t, inject.budget.TryAcquire(maxReviewBytes), "the path's own budget was never charged")
}

func TestTheWaitForBudgetFollowsTheAPIServersTimeout(t *testing.T) {
	for target, want := range map[string]time.Duration{
		"/p?timeout=5s":    2500 * time.Millisecond,
		"/p?timeout=10s":   7500 * time.Millisecond,
		"/p?timeout=50ms":  25 * time.Millisecond,
		"/p?timeout=1h":    maxBudgetWait - 2500*time.Millisecond,
		"/p?timeout=bogus": maxBudgetWait - 2500*time.Millisecond,
		"/p":               maxBudgetWait - 2500*time.Millisecond,
	} {
		assert.Equal(t, want, budgetWait(postTo(context.Background(), target, strings.NewReader("{}"), 2)), target)
	}
}

func TestASmallReviewIsChargedTheMinimum(t *testing.T) {
	l := newReviewBudgets(minReviewCost).forPath("/p")
	h := l.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		assert.False(t, l.budget.TryAcquire(1), "a 2-byte review is charged the minimum")
	}))
	h.ServeHTTP(httptest.NewRecorder(), post(context.Background(), strings.NewReader("{}"), 2))
}

func TestAReviewThatCannotGetBudgetIsAnswered503(t *testing.T) {
	l := newReviewBudgets(minReviewCost).forPath("/p")
	require.True(t, l.budget.TryAcquire(minReviewCost))
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the API server has given up
	w := httptest.NewRecorder()
	l.wrap(http.NotFoundHandler()).ServeHTTP(w, post(ctx, strings.NewReader("{}"), 2))
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
}

// On the guard's enforce paths a review that cannot get budget in time is
// refused in an answer (429, its UID echoed), which the API server takes
// whatever the registration's failure policy: a flood of the connect path
// cannot let a reaper's exec through its Ignore. Warn mode's and the
// injector's paths fail as before.
func TestAnEnforceReviewThatCannotGetBudgetIsRefusedNotFailed(t *testing.T) {
	review := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-42","operation":"CONNECT"}}`
	for path, refused := range map[string]bool{
		guard.ConnectModePath(config.ModeEnforce): true,
		guard.ModePath(config.ModeEnforce):        true,
		guard.ConnectModePath(config.ModeWarn):    false,
		"/mutate-runner-pod":                      false,
	} {
		l := newReviewBudgets(minReviewCost).forPath(path)
		require.True(t, l.budget.TryAcquire(minReviewCost), "the path is full")
		w := httptest.NewRecorder()
		l.wrap(http.NotFoundHandler()).ServeHTTP(w, postTo(context.Background(), path+"?timeout=100ms", strings.NewReader(review), int64(len(review))))
		if !refused {
			assert.Equal(t, http.StatusServiceUnavailable, w.Code, path)
			continue
		}
		require.Equal(t, http.StatusOK, w.Code, path)
		var answer admissionv1.AdmissionReview
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &answer), path)
		require.NotNil(t, answer.Response, path)
		assert.Equal(t, types.UID("u-42"), answer.Response.UID, path)
		assert.False(t, answer.Response.Allowed, path)
		assert.Equal(t, int32(http.StatusTooManyRequests), answer.Response.Result.Code, path)
	}
}

// stalled is a body that declares its length and never sends a byte, as
// a client on the pod network holding connections open would.
// It first sends sent bytes, if any, and says on reading when it has.
type stalled struct {
	ctx     context.Context
	sent    int
	reading chan<- struct{}
}

func (s *stalled) Read(p []byte) (int, error) {
	if s.sent > 0 {
		n := min(len(p), s.sent)
		s.sent -= n
		return n, nil
	}
	if s.reading != nil {
		s.reading <- struct{}{}
		s.reading = nil
	}
	<-s.ctx.Done()
	return 0, s.ctx.Err()
}

// stall starts n reviews from sender that each send sent bytes of the
// length they declare and then nothing, and returns once all are waiting
// for more.
func stall(t *testing.T, l reviewLimits, n int, sender string, sent int, declared int64) {
	ctx, cancel := context.WithCancel(context.Background())
	reading := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			r := postTo(ctx, l.path+"?timeout=10s", &stalled{ctx: ctx, sent: sent, reading: reading}, declared)
			r.RemoteAddr = sender + ":4000"
			l.wrap(http.NotFoundHandler()).ServeHTTP(httptest.NewRecorder(), r)
		})
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	for range n {
		<-reading
	}
}

// serveSmall posts a small review from sender and says whether it was served.
func serveSmall(l reviewLimits, sender string) (bool, int) {
	called := false
	w := httptest.NewRecorder()
	r := postTo(context.Background(), l.path+"?timeout=1s", strings.NewReader("{}"), 2)
	r.RemoteAddr = sender + ":5000"
	l.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })).ServeHTTP(w, r)
	return called, w.Code
}

// Reviews that declare bodies and send nothing hold no budget: however
// many there are, the API server's review of the same path is answered at
// once.
func TestReviewsThatSendNothingHoldNoBudget(t *testing.T) {
	l := newReviewBudgets(maxReviewBytes).forPath("/validate-runner-connect")
	for i := range 4 {
		stall(t, l, 16, "10.0.0."+strconv.Itoa(i), 0, largeReviewBytes)
	}
	called, code := serveSmall(l, "172.18.0.1")
	assert.True(t, called, "the API server's review was served")
	assert.Equal(t, http.StatusOK, code)
	assert.True(t, l.budget.TryAcquire(maxReviewBytes), "the stalled reviews hold none of the path's budget")
}

// A sender that sends part of its bodies and stalls holds only its share:
// its next review waits and is refused in time, another sender's is served.
func TestASenderThatStallsMidBodyHoldsOnlyItsShare(t *testing.T) {
	l := newReviewBudgets(maxReviewBytes).forPath("/mutate-runner-pod")
	stall(t, l, 2*receivePerSenderBytes/largeReviewBytes, "10.0.0.9", largeReviewBytes/2, largeReviewBytes)

	called, code := serveSmall(l, "10.0.0.9")
	assert.False(t, called, "the stalling sender gets no more in")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	called, code = serveSmall(l, "172.18.0.1")
	assert.True(t, called, "the API server's review was served")
	assert.Equal(t, http.StatusOK, code)
}

// A sender at its share waits, holding what it has, until one of its
// bodies is given back, then goes on; it never takes another's room.
func TestABodyWaitsForItsSendersRoomAndGetsItWhenFreed(t *testing.T) {
	p := newReceivePool(3*largeReviewBytes, 2*largeReviewBytes)
	require.NoError(t, p.take(context.Background(), "a", 2*largeReviewBytes))
	require.NoError(t, p.take(context.Background(), "b", largeReviewBytes), "another sender has room")
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, p.take(ctx, "a", 1), errReceiveFull, "a is at its share")

	got := make(chan error)
	go func() { got <- p.take(context.Background(), "a", largeReviewBytes) }()
	p.give("a", largeReviewBytes)
	assert.NoError(t, <-got)
	p.give("a", 2*largeReviewBytes)
	p.give("b", largeReviewBytes)
	assert.Zero(t, p.used)
	assert.Empty(t, p.bySender)
}

// What a review held while it arrived is given back when it fails.
func TestABodyThatBreaksOffHoldsNothing(t *testing.T) {
	p := newReceivePool(receiveTotalBytes, receivePerSenderBytes)
	_, err := receive(context.Background(), p, "a", io.MultiReader(bytes.NewReader(make([]byte, 100<<10)), iotest.ErrReader(io.ErrUnexpectedEOF)), maxReviewBytes)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Zero(t, p.used)
}
