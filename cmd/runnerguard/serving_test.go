package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func post(ctx context.Context, body io.Reader, length int64) *http.Request {
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/validate-runner-pod", body)
	r.ContentLength = length
	return r
}

func TestAReviewOverTheLimitIsRefusedUnread(t *testing.T) {
	l := newReviewLimits(16 << 20)
	called := false
	h := l.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, post(context.Background(), strings.NewReader("{}"), maxReviewBytes+1))
	assert.Equal(t, http.StatusRequestEntityTooLarge, w.Code)
	assert.False(t, called)
}

func TestABodyWithoutALengthStopsAtTheLimit(t *testing.T) {
	l := newReviewLimits(16 << 20)
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

// Two of the largest reviews fill a budget of twice their size: a third
// waits until one is done, while the budget is charged per byte.
func TestTheBudgetBoundsTheLargestReviewsInFlight(t *testing.T) {
	l := newReviewLimits(2 * maxReviewBytes)
	entered, release := make(chan struct{}), make(chan struct{})
	h := l.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		entered <- struct{}{}
		<-release
	}))
	done := make(chan struct{})
	for range 3 {
		go func() {
			h.ServeHTTP(httptest.NewRecorder(), post(context.Background(), strings.NewReader("{}"), maxReviewBytes))
			done <- struct{}{}
		}()
	}
	<-entered
	<-entered
	require.False(t, l.budget.TryAcquire(1), "two of the largest reviews take the whole budget")
	release <- struct{}{}
	<-done
	<-entered // the third gets in once one is done
	release <- struct{}{}
	release <- struct{}{}
	<-done
	<-done
	assert.True(t, l.budget.TryAcquire(2*maxReviewBytes), "everything is given back")
}

func TestASmallReviewIsChargedTheMinimum(t *testing.T) {
	l := newReviewLimits(minReviewCost)
	h := l.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		assert.False(t, l.budget.TryAcquire(1), "a 2-byte review is charged the minimum")
	}))
	h.ServeHTTP(httptest.NewRecorder(), post(context.Background(), strings.NewReader("{}"), 2))
}

func TestAReviewThatCannotGetBudgetIsAnswered503(t *testing.T) {
	l := newReviewLimits(minReviewCost)
	require.True(t, l.budget.TryAcquire(minReviewCost))
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the API server has given up
	w := httptest.NewRecorder()
	l.wrap(http.NotFoundHandler()).ServeHTTP(w, post(ctx, strings.NewReader("{}"), 2))
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
}
