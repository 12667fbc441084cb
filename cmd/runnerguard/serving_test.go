package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
			h.ServeHTTP(httptest.NewRecorder(), post(context.Background(), strings.NewReader("{}"), largeReviewBytes))
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
	inject.wrap(http.NotFoundHandler()).ServeHTTP(w, postTo(context.Background(), "/mutate-runner-pod?timeout=300ms", strings.NewReader("{}"), 3<<20))
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.Contains(t, w.Body.String(), "too many reviews in flight on large reviews")
	assert.Less(t, time.Since(start), maxBudgetWait, "refused within the API server's timeout, not after the longest wait")
	assert.True(t, inject.budget.TryAcquire(maxReviewBytes), "the path's own budget was never charged")
}

func TestTheWaitForBudgetFollowsTheAPIServersTimeout(t *testing.T) {
	for target, want := range map[string]time.Duration{
		"/p?timeout=5s":    4900 * time.Millisecond,
		"/p?timeout=10s":   9900 * time.Millisecond,
		"/p?timeout=50ms":  0,
		"/p?timeout=1h":    maxBudgetWait,
		"/p?timeout=bogus": maxBudgetWait,
		"/p":               maxBudgetWait,
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
