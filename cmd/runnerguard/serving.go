package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/webhook/guard"
	"golang.org/x/sync/semaphore"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Review limits. Anyone who can reach the webhook port can post a review,
// so what one costs is bounded here, before controller-runtime reads it.
const (
	// maxReviewBytes admits the largest review the API server sends us: it
	// refuses request bodies over 3 MiB, a pod is one object in a CREATE or
	// DELETE review (never two: we review no UPDATE), and the review around
	// it is small. controller-runtime's own bound is 7 MiB, sized for two
	// objects.
	maxReviewBytes = 4 << 20
	// largeReviewBytes is where a review stops being ordinary: a runner
	// pod, even with a long env and many containers, is a small fraction
	// of it; the reviews above it are pathological pods or someone's
	// flood.
	largeReviewBytes = 1 << 20
	// minReviewCost is what a small review is charged against the budget:
	// decoding and answering cost more than the body's bytes.
	minReviewCost = 64 << 10
	// reviewReadTimeout bounds reading one body: the API server sends it at
	// once, a client that trickles it holds what it sent only this long.
	reviewReadTimeout = 10 * time.Second
	// receivePerSenderBytes bounds the bodies one address may have arrived
	// or arriving at once, and receiveTotalBytes the whole server's: above
	// what every path's budget admits at once, so the API server's reviews
	// queue for their path, never here, while no one sender on the pod
	// network holds more than a share.
	receivePerSenderBytes = 2 * maxReviewBytes
	receiveTotalBytes     = 4 * receivePerSenderBytes
	// maxBudgetWait bounds waiting for budget: the API server gives up on
	// a webhook after at most 30 s. It waits less when the review says so
	// (budgetWait).
	maxBudgetWait = 30 * time.Second
)

// reviewLimits charges each review its body's size against a budget of
// bytes in flight, so many small reviews run at once but only a few of the
// largest: a review's decode, mutation and patch cost a multiple of its size
// in heap (measured in e2e/api/hardening_test.go).
//
// Each webhook path has a budget of its own for its ordinary reviews, so
// that the guard's traffic, or a flood posted to any path but the
// injector's, never delays the injector (whose failure policy lets a pod in
// uninstrumented when it times out). The large reviews, over
// largeReviewBytes, share one budget of one largest review for the whole
// server instead: they are what a flood is made of and what costs memory,
// and no ordinary review waits behind them.
type reviewLimits struct {
	budget *semaphore.Weighted
	// large is shared by every path's limits.
	large *semaphore.Weighted
	path  string
	max   int64
	// received is shared by every path's limits.
	received *receivePool
}

// reviewBudgets hands out each path's limits, all sharing one budget of
// large reviews.
type reviewBudgets struct {
	perPath  int64
	large    *semaphore.Weighted
	received *receivePool
}

func newReviewBudgets(perPath int64) reviewBudgets {
	return reviewBudgets{
		perPath:  perPath,
		large:    semaphore.NewWeighted(maxReviewBytes),
		received: newReceivePool(receiveTotalBytes, receivePerSenderBytes),
	}
}

// forPath is the limits of the reviews posted to path.
func (b reviewBudgets) forPath(path string) reviewLimits {
	return reviewLimits{budget: semaphore.NewWeighted(b.perPath), large: b.large, received: b.received, path: path, max: maxReviewBytes}
}

func (l reviewLimits) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > l.max {
			http.Error(w, fmt.Sprintf("runnerguard: a review of %d bytes is over the %d-byte limit", r.ContentLength, l.max), http.StatusRequestEntityTooLarge)
			return
		}
		// The wait for budget and the answer after it share one deadline,
		// so a review that waited still answers before the API server
		// gives up.
		ctx, cancel := context.WithTimeout(r.Context(), budgetWait(r))
		defer cancel()
		release, err := l.take(ctx, w, r)
		if err != nil {
			refuse(w, err, l.path)
			return
		}
		defer release()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// take takes a review's budget, and leaves its body in r.Body.
//
// An ordinary review (declaring up to largeReviewBytes; the server reads no
// more than a body declares) is read first, charged to its sender for what
// arrives, then charged to its path's budget for its size: one that
// declares a body and sends nothing holds nothing.
//
// A large one, or one that declares no length, takes the shared budget of
// large reviews for what it declares before it is read, and is read by the
// handler as it was sent: those are pathological pods or a flood, and run
// one at a time whatever they send; a stalled one delays only them.
func (l reviewLimits) take(ctx context.Context, w http.ResponseWriter, r *http.Request) (release func(), err error) {
	if declared := r.ContentLength; declared < 0 || declared > largeReviewBytes {
		if declared < 0 { // unknown: the most a body may be
			declared = l.max
		}
		if err := l.large.Acquire(ctx, declared); err != nil {
			return nil, errBudget{which: "large reviews (over 1 MiB)"}
		}
		readWithin(w, reviewReadTimeout)
		// A body longer than it said stops at max; the handler then
		// answers 400.
		r.Body = http.MaxBytesReader(w, r.Body, l.max)
		return func() { l.large.Release(declared) }, nil
	}
	readWithin(w, reviewReadTimeout)
	got, err := receive(ctx, l.received, senderOf(r), r.Body, largeReviewBytes)
	if err != nil {
		return nil, err
	}
	cost := max(int64(len(got.body)), minReviewCost)
	if err := l.budget.Acquire(ctx, cost); err != nil {
		got.release()
		return nil, errBudget{which: l.path, review: reviewUID(got.body)}
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(got.body)), int64(len(got.body))
	return func() { l.budget.Release(cost); got.release() }, nil
}

// readWithin bounds reading the rest of a review's body. Not every
// ResponseWriter supports deadlines (httptest's does not); the server's
// does.
func readWithin(w http.ResponseWriter, d time.Duration) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
}

// errBudget is a review that waited for its budget, named, as long as the
// API server waits for it; review is its request's UID, when its body was
// read and names one.
type errBudget struct{ which, review string }

func (e errBudget) Error() string { return "too many reviews in flight on " + e.which }

// deniedWhenFull are the paths whose review, when it cannot be taken in,
// is refused in an answer rather than failed: the guard's in enforce,
// whose connect registration's failure policy (Ignore) would otherwise
// let a reaper's exec into a busy runner through a flood of the path
// (deletes and evictions are refused either way). Warn mode's paths never
// refuse, and the injector's failure lets the pod in as before.
var deniedWhenFull = []string{guard.ModePath(config.ModeEnforce), guard.ConnectModePath(config.ModeEnforce)}

// reviewUID is the UID of the review in body, "" if none can be read.
func reviewUID(body []byte) string {
	var r struct {
		Request struct {
			UID string `json:"uid"`
		} `json:"request"`
	}
	if json.Unmarshal(body, &r) != nil {
		return ""
	}
	return r.Request.UID
}

// deny answers the review of uid with a refusal for now (429): the API
// server takes it as the webhook's answer, whatever its failure policy.
func deny(w http.ResponseWriter, uid, message string) {
	body, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Response: &admissionv1.AdmissionResponse{UID: types.UID(uid), Allowed: false, Result: &metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusTooManyRequests, Reason: metav1.StatusReasonTooManyRequests, Message: message}},
	})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// refuse answers a review that could not be taken in: said at once, not
// after the API server has given up, so the caller sees why.
func refuse(w http.ResponseWriter, err error, path string) {
	var budget errBudget
	switch {
	case errors.As(err, &budget) && budget.review != "" && slices.Contains(deniedWhenFull, path):
		// Said at V(1): a flood would fill the log at the default level.
		ctrl.Log.V(1).Info("review refused for now: no budget in time", "path", path, "review", budget.review)
		deny(w, budget.review, fmt.Sprintf("runnerguard cannot judge this request now: %s; retry", budget))
	case errors.As(err, &budget):
		http.Error(w, fmt.Sprintf("runnerguard: %s; retry", budget), http.StatusServiceUnavailable)
	case errors.Is(err, errReceiveFull):
		http.Error(w, fmt.Sprintf("runnerguard: too many review bytes in flight from this sender or on %s; retry", path), http.StatusServiceUnavailable)
	default:
		// The sender stopped sending: a deadline or a closed connection.
		http.Error(w, "runnerguard: the review's body did not arrive in time", http.StatusRequestTimeout)
	}
}

// budgetWait is how long a review may wait for budget: until its answer
// is due (guard.AnswerDue: before the API server gives up), so a review
// that cannot be answered in time is refused at once instead of holding
// its place in the queue; at most maxBudgetWait whatever the caller
// claims.
func budgetWait(r *http.Request) time.Duration {
	return guard.AnswerDue(r.URL.Query().Get("timeout"), maxBudgetWait)
}

// boundedServer is controller-runtime's webhook server with every webhook
// registered through its path's reviewLimits.
type boundedServer struct {
	webhook.Server
	budgets reviewBudgets
}

func (s boundedServer) Register(path string, hook http.Handler) {
	s.Server.Register(path, s.budgets.forPath(path).wrap(hook))
}

// http1Only turns HTTP/2 off, as kubebuilder scaffolds do: HTTP/2's stream
// multiplexing made the webhook and metrics servers open to the rapid-reset
// and stream-cancellation attacks (CVE-2023-44487, CVE-2023-39325); the API
// server and Prometheus speak HTTP/1.1 as well.
func http1Only(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }

// setMemoryLimit sets the Go runtime's soft memory limit to a quarter of the
// container's (MEMORY_LIMIT, bytes, from the downward API's limits.memory).
// The collector lets the heap grow to the soft limit before it works
// harder, so the limit is where the heap peaks: a quarter keeps the whole
// process (heap, stacks, TLS buffers, memory freed but not yet returned,
// the binary) under half the container's limit through a burst of the
// largest reviews with a margin (a third left too little: see
// docs/performance), and a burst slows the server rather than getting it
// OOM-killed. A GOMEMLIMIT set by hand wins.
func setMemoryLimit() {
	limit, err := strconv.ParseInt(os.Getenv("MEMORY_LIMIT"), 10, 64)
	if os.Getenv("GOMEMLIMIT") != "" || err != nil || limit <= 0 {
		return
	}
	debug.SetMemoryLimit(limit / 4)
	ctrl.Log.Info("soft memory limit set", "bytes", limit/4, "containerLimit", limit)
}

// metricsOptions serves metrics over HTTPS, with the serving certificate
// the webhook uses (its names are the Service's, which a ServiceMonitor
// scrapes), to clients whose token the API server authenticates and allows
// to get /metrics; or, with secure false, as plain HTTP.
func metricsOptions(addr string, secure bool, certDir string) metricsserver.Options {
	o := metricsserver.Options{BindAddress: addr}
	if secure {
		o.SecureServing, o.CertDir, o.TLSOpts = true, certDir, []func(*tls.Config){http1Only}
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return o
}
