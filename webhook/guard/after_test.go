package guard

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// serve sends req to the guard as the API server does, through the seam (the
// path production takes: the answer held and sent whole, then the work
// after it), and returns the answer once that work is done.
func serve(t testing.TB, h *Handler, req admission.Request) admission.Response {
	t.Helper()
	w := httptest.NewRecorder()
	h.after.serve(h.Review).ServeHTTP(w, reviewRequest(t, req))
	h.Wait()
	return answerOf(t, w.Body.Bytes())
}

// serveRecord is serve for the room of ARC's EphemeralRunner deletes.
func serveRecord(t testing.TB, h *Handler, req admission.Request) admission.Response {
	t.Helper()
	w := httptest.NewRecorder()
	h.after.serve(h.Records(arcscaleset.Fleet{}).Review).ServeHTTP(w, reviewRequest(t, req))
	h.Wait()
	return answerOf(t, w.Body.Bytes())
}

func reviewRequest(t testing.TB, req admission.Request) *http.Request {
	t.Helper()
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  &req.AdmissionRequest,
	})
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

func answerOf(t testing.TB, body []byte) admission.Response {
	t.Helper()
	var review admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(body, &review))
	require.NotNil(t, review.Response, "an answer: %s", body)
	return admission.Response{AdmissionResponse: *review.Response}
}

// atAnswer calls check when the answer is written to the client.
type atAnswer struct {
	*httptest.ResponseRecorder
	check func()
}

func (a atAnswer) Write(b []byte) (int, error) {
	a.check()
	return a.ResponseRecorder.Write(b)
}

// The named exception runs before the answer: when the answer is written,
// the unlabelled runner pod whose deletion it admits is labelled already.
// Everything else follows: neither the note nor the Event of that
// deletion exists yet.
func TestTheRunnerLabelIsWrittenBeforeTheAnswerAndTheRestAfterIt(t *testing.T) {
	pod := podtest.Runner("ci", "r").Running("runner").Annotate(runnerpod.AllowDelete, "drain").Obj()
	h, rec := newTestHandler(pod)
	var labelled, noted, evented bool
	w := atAnswer{ResponseRecorder: httptest.NewRecorder(), check: func() {
		got := &corev1.Pod{}
		require.NoError(t, h.Reader.Get(context.Background(), client.ObjectKeyFromObject(pod), got))
		labelled = got.Labels[runnerpod.RunnerLabel] == "true"
		noted = h.Reader.Get(context.Background(), client.ObjectKey{Namespace: pod.Namespace, Name: string(pod.UID)}, &v1alpha1.RunnerDeletion{}) == nil
		evented = len(rec.Events) > 0
	}}
	h.after.serve(h.Review).ServeHTTP(w, reviewRequest(t, deleteReq(t, pod, "alice", false, nil)))
	h.Wait()
	assert.True(t, answerOf(t, w.Body.Bytes()).Allowed)
	assert.True(t, labelled, "labelled before the answer")
	assert.False(t, noted, "no note before the answer")
	assert.False(t, evented, "no Event before the answer")
	assert.NotNil(t, deletionNote(t, h, pod), "noted after it")
	assert.Len(t, drain(rec), 1, "the override's Event after it")
}

// Work handed over for later (a pod's refusals once they settle) is
// waited for as the rest is: a replica that stops writes it first.
func TestDelayedWorkIsWaitedFor(t *testing.T) {
	a := newAfterAnswer(1)
	var done atomic.Bool
	a.delayed(context.Background(), 50*time.Millisecond, func(context.Context) { done.Store(true) })
	a.wait()
	assert.True(t, done.Load())
}
