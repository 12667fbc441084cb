package guard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/deletion"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/runnerguard/runnerguard/internal/fleet/gitlab"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

func raw(t testing.TB, obj any) runtime.RawExtension {
	t.Helper()
	b, err := json.Marshal(obj)
	require.NoError(t, err)
	return runtime.RawExtension{Raw: b}
}

func deleteReq(t testing.TB, pod *corev1.Pod, user string, dryRun bool, grace *int64) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Delete, Namespace: pod.Namespace, Name: pod.Name,
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		UserInfo: authenticationv1.UserInfo{Username: user}, DryRun: &dryRun,
		OldObject: raw(t, pod), Options: raw(t, metav1.DeleteOptions{GracePeriodSeconds: grace}),
	}}
}

func evictionReq(t testing.TB, ns, name, user string, opts *metav1.DeleteOptions) admission.Request {
	ev := policyv1.Eviction{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, DeleteOptions: opts}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Namespace: ns, Name: name, SubResource: "eviction",
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		UserInfo: authenticationv1.UserInfo{Username: user}, DryRun: ptr.To(false), Object: raw(t, ev),
	}}
}

func ephemeralRunner(name string, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"status": status}}
	u.SetAPIVersion("actions.github.com/v1alpha1")
	u.SetKind("EphemeralRunner")
	u.SetNamespace("ci")
	u.SetName(name)
	u.SetUID(types.UID("er-" + name)) // the UID podtest.ARCScaleSet's owner reference names
	return u
}

func newTestHandler(objs ...client.Object) (*Handler, *events.FakeRecorder) {
	rec := events.NewFakeRecorder(10)
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	h := NewHandler(configtest.Enforcing(), c, c, rec)
	h.Now = func() time.Time { return podtest.Start.Add(5 * time.Minute) }
	return h, rec
}

func drain(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestHandleDelete(t *testing.T) {
	busy := podtest.Runner("ci", "busy").Running("runner").Obj()
	cases := []struct {
		name    string
		req     admission.Request
		allowed bool
		code    int32
		msg     string
		warning string
		events  []string
	}{
		{name: "a busy runner's delete is refused with 403 and a Warning Event naming the requester",
			req: deleteReq(t, busy, reaper, false, nil), code: http.StatusForbidden, msg: "running for 5m (since 2026-11-01T12:00:00Z) and",
			events: []string{"Warning DeleteRefused refused delete by " + reaper}},
		{name: "a force delete of a busy runner is refused too",
			req: deleteReq(t, busy, reaper, false, ptr.To(int64(0))), code: http.StatusForbidden, msg: "running for 5m (since 2026-11-01T12:00:00Z) and",
			events: []string{"Warning DeleteRefused"}},
		{name: "a dry-run delete gets the same answer and no Event",
			req: deleteReq(t, busy, reaper, true, nil), code: http.StatusForbidden, msg: "running for 5m (since 2026-11-01T12:00:00Z) and"},
		{name: "an override is allowed with a warning and a Normal Event",
			req:     deleteReq(t, podtest.Runner("ci", "o").Running("runner").Annotate(runnerpod.AllowDelete, "node upgrade").Obj(), "alice", false, nil),
			allowed: true, code: http.StatusOK, warning: "node upgrade", events: []string{"Normal DeleteOverridden delete by alice allowed by runnerguard.io/allow-delete: node upgrade"}},
		{name: "a dry-run override warns but emits no Event",
			req:     deleteReq(t, podtest.Runner("ci", "o").Running("runner").Annotate(runnerpod.AllowDelete, "x").Obj(), "alice", true, nil),
			allowed: true, code: http.StatusOK, warning: "x"},
		{name: "a runner past its preset's cap is allowed with a Warning Event saying the protection expired",
			req:     deleteReq(t, podtest.Runner("ci", "old").RunningSince("runner", podtest.Start.Add(-200*time.Hour)).Obj(), reaper, false, nil),
			allowed: true, code: http.StatusOK, warning: "protection expired",
			events: []string{"Warning ProtectionExpired delete by " + reaper + " allowed: the protection expired"}},
		{name: "a plain pod is allowed", req: deleteReq(t, podtest.Plain("ci", "web").Obj(), reaper, false, nil), allowed: true, code: http.StatusOK},
		{name: "a deletecollection review (no request name) reads the pod from oldObject",
			req: func() admission.Request { r := deleteReq(t, busy, reaper, false, nil); r.Name = ""; return r }(), code: http.StatusForbidden, msg: "ci/busy",
			events: []string{"Warning DeleteRefused"}},
		{name: "a DELETE without oldObject is a bad request",
			req: func() admission.Request {
				r := deleteReq(t, busy, reaper, false, nil)
				r.OldObject = runtime.RawExtension{}
				return r
			}(), code: http.StatusBadRequest, msg: "without oldObject"},
		{name: "an oldObject that is not a pod is a bad request",
			req: func() admission.Request {
				r := deleteReq(t, busy, reaper, false, nil)
				r.OldObject = runtime.RawExtension{Raw: []byte(`{"spec":{"containers":"nope"}}`)}
				return r
			}(), code: http.StatusBadRequest, msg: "decoding oldObject"},
		{name: "an operation the guard does not judge is allowed",
			req: func() admission.Request {
				r := deleteReq(t, busy, reaper, false, nil)
				r.Operation = admissionv1.Update
				return r
			}(), allowed: true, code: http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The review's pod exists, as it does when the API server sends it.
			var objs []client.Object
			if pod := (&corev1.Pod{}); json.Unmarshal(tc.req.OldObject.Raw, pod) == nil && pod.Name != "" {
				objs = append(objs, pod)
			}
			h, rec := newTestHandler(objs...)
			resp := serve(t, h, tc.req)
			assert.Equal(t, tc.allowed, resp.Allowed)
			assert.Equal(t, tc.code, resp.Result.Code)
			assert.Contains(t, resp.Result.Message, tc.msg)
			if tc.warning != "" {
				require.Len(t, resp.Warnings, 1)
				assert.Contains(t, resp.Warnings[0], tc.warning)
			} else {
				assert.Empty(t, resp.Warnings)
			}
			got := drain(rec)
			require.Len(t, got, len(tc.events), "events: %v", got)
			for i, e := range tc.events {
				assert.Contains(t, got[i], e)
			}
		})
	}
}

func TestHandleEviction(t *testing.T) {
	cases := []struct {
		name     string
		objs     []client.Object
		req      admission.Request
		allowed  bool
		code     int32
		msg      string
		events   int
		warnings []string
	}{
		{name: "a busy runner's eviction is answered 429 so drains retry",
			objs: []client.Object{podtest.Runner("ci", "r").Running("runner").Obj()},
			req:  evictionReq(t, "ci", "r", reaper, nil), code: http.StatusTooManyRequests, msg: "eviction will succeed once the job ends", events: 1},
		{name: "a server-side dry-run drain (dryRun only in deleteOptions) gets 429 and no Event",
			objs: []client.Object{podtest.Runner("ci", "r").Running("runner").Obj()},
			req:  evictionReq(t, "ci", "r", reaper, &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}), code: http.StatusTooManyRequests},
		{name: "the eviction of a pod that is gone is allowed",
			req: evictionReq(t, "ci", "gone", reaper, nil), allowed: true, code: http.StatusOK},
		{name: "a dry-run eviction of a pod that is gone is allowed with the warning runnerguard check looks for",
			req: evictionReq(t, "ci", "gone", reaper, &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}), allowed: true, code: http.StatusOK,
			warnings: []string{runnerpod.GoneWarning}},
		{name: "an idle ARC runner may be evicted",
			objs: []client.Object{podtest.ARCScaleSet("ci", "r").Running("runner").Obj(), ephemeralRunner("r", map[string]any{"phase": "Running"})},
			req:  evictionReq(t, "ci", "r", reaper, nil), allowed: true, code: http.StatusOK},
		{name: "an ARC runner with a jobRequestId is busy",
			objs: []client.Object{podtest.ARCScaleSet("ci", "r").Running("runner").Obj(), ephemeralRunner("r", map[string]any{"jobRequestId": int64(42)})},
			req:  evictionReq(t, "ci", "r", reaper, nil), code: http.StatusTooManyRequests, msg: "with a job assigned", events: 1},
		{name: "an ARC runner with a jobId is busy",
			objs: []client.Object{podtest.ARCScaleSet("ci", "r").Running("runner").Obj(), ephemeralRunner("r", map[string]any{"jobId": "abc"})},
			req:  evictionReq(t, "ci", "r", reaper, nil), code: http.StatusTooManyRequests, msg: "with a job assigned", events: 1},
		{name: "an ARC runner whose EphemeralRunner of that name has another UID is busy",
			objs: []client.Object{podtest.ARCScaleSet("ci", "r").Running("runner").Obj(), func() client.Object {
				er := ephemeralRunner("r", map[string]any{"phase": "Running"})
				er.SetUID("recreated")
				return er
			}()},
			req: evictionReq(t, "ci", "r", reaper, nil), code: http.StatusTooManyRequests, msg: "not the pod's owner by UID", events: 1},
		{name: "an ARC runner whose EphemeralRunner is missing is busy",
			objs: []client.Object{podtest.ARCScaleSet("ci", "r").Running("runner").Obj()},
			req:  evictionReq(t, "ci", "r", reaper, nil), code: http.StatusTooManyRequests, msg: "could not be read", events: 1},
		{name: "an eviction whose object is not an Eviction is a bad request",
			req: func() admission.Request {
				r := evictionReq(t, "ci", "r", reaper, nil)
				r.Object = runtime.RawExtension{Raw: []byte(`[1,2]`)}
				return r
			}(), code: http.StatusBadRequest, msg: "decoding object as an Eviction"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, rec := newTestHandler(tc.objs...)
			resp := serve(t, h, tc.req)
			assert.Equal(t, tc.allowed, resp.Allowed)
			assert.Equal(t, tc.code, resp.Result.Code)
			assert.Contains(t, resp.Result.Message, tc.msg)
			if !tc.allowed && tc.code == http.StatusTooManyRequests {
				assert.Equal(t, metav1.StatusReasonTooManyRequests, resp.Result.Reason)
			}
			assert.Equal(t, tc.warnings, []string(resp.Warnings))
			assert.Len(t, drain(rec), tc.events)
		})
	}
}

func deletionNote(t *testing.T, h *Handler, pod *corev1.Pod) *v1alpha1.DeletionNote {
	t.Helper()
	h.Wait() // written after the answer
	n := &v1alpha1.RunnerDeletion{}
	err := h.Reader.Get(context.Background(), client.ObjectKey{Namespace: pod.Namespace, Name: string(pod.UID)}, n)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return &n.Deletion
}

func TestAnAllowedDeleteOfARunningRunnerNotesTheDeleter(t *testing.T) {
	pod := podtest.Runner("ci", "r").Running("runner").Annotate(runnerpod.AllowDelete, "drain").Obj()
	h, _ := newTestHandler(pod)
	dry := deleteReq(t, pod, "alice", true, nil)
	require.True(t, serve(t, h, dry).Allowed)
	assert.Nil(t, deletionNote(t, h, pod), "a dry run notes nothing")
	for range 2 {
		require.True(t, serve(t, h, deleteReq(t, pod, "alice", false, ptr.To(int64(0)))).Allowed)
	}
	n := deletionNote(t, h, pod)
	require.NotNil(t, n)
	assert.True(t, n.Time.Time.Equal(podtest.Start.Add(5*time.Minute)), "noted at the review's time")
	n.Time = metav1.Time{}
	assert.Equal(t, v1alpha1.DeletionNote{Pod: "r", UID: "uid-r", Requester: "alice", Operation: "delete", Rule: "override", Reason: "drain"}, *n)
}

func TestAnOverriddenEvictionIsNoted(t *testing.T) {
	pod := podtest.Runner("ci", "r").Running("runner").Annotate(runnerpod.AllowDelete, "node upgrade").Obj()
	h, _ := newTestHandler(pod)
	require.True(t, serve(t, h, evictionReq(t, "ci", "r", "drainer", nil)).Allowed)
	n := deletionNote(t, h, pod)
	require.NotNil(t, n)
	assert.Equal(t, "eviction", n.Operation)
	assert.Equal(t, "drainer", n.Requester)
}

func TestWarnModeAllowsABusyRunnersDeleteAndSaysSo(t *testing.T) {
	pod := podtest.Runner("ci", "r").Running("runner").Obj()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ci", Labels: map[string]string{runnerpod.ModeLabel: "warn"}}}
	h, rec := newTestHandler(pod, ns)
	h.Namespaces = h.Reader
	resp := serve(t, h, deleteReq(t, pod, reaper, false, nil))
	require.True(t, resp.Allowed)
	require.Len(t, resp.Warnings, 1)
	assert.Contains(t, resp.Warnings[0], "runnerguard (warn mode) allowed this; enforce mode would have refused it: runner container")
	assert.Equal(t, []string{"Warning DeleteRefusedInWarnMode delete by " + reaper + ` allowed in warn mode: runner "runner" is busy and enforce mode would refuse it`}, drain(rec))
	n := deletionNote(t, h, pod)
	require.NotNil(t, n)
	assert.Equal(t, "busy", n.Rule, "the record will say enforce would have refused it")

	ns.Labels[runnerpod.ModeLabel] = "enforce"
	require.NoError(t, h.Writer.(client.Client).Update(context.Background(), ns))
	assert.False(t, serve(t, h, deleteReq(t, pod, reaper, false, nil)).Allowed, "the label takes effect at once")
}

func TestADeleteOfAFinishedRunnerNotesNothing(t *testing.T) {
	pod := podtest.Runner("ci", "r").Terminated("runner", 0, "Completed").Obj()
	h, rec := newTestHandler(pod)
	require.True(t, serve(t, h, deleteReq(t, pod, "arc-controller", false, nil)).Allowed)
	assert.Nil(t, deletionNote(t, h, pod), "the watcher records the death; there is no deleter to name")
	assert.Empty(t, drain(rec))
}

func TestAReviewTheAPIServerDidNotSendWritesNothing(t *testing.T) {
	real := podtest.Runner("ci", "r").Running("runner").Obj()
	forged := podtest.Runner("ci", "r").Running("runner").Annotate(runnerpod.AllowDelete, "forged").Obj()
	forged.UID = "not-the-pods-uid"
	ghost := podtest.Runner("ci", "ghost").Running("runner").Obj()
	h, rec := newTestHandler(real)
	for _, req := range []admission.Request{
		deleteReq(t, forged, "mallory", false, nil), // an allowed override of a pod with another UID
		deleteReq(t, ghost, "mallory", false, nil),  // a refusal of a pod that does not exist
	} {
		serve(t, h, req)
	}
	assert.Empty(t, drain(rec), "no Event on a pod named by a forged review")
	assert.Nil(t, deletionNote(t, h, forged))
	assert.Nil(t, deletionNote(t, h, real), "no note planted on the real pod either")
}

func TestAnEvictionWhosePodCannotBeReadIsRetried(t *testing.T) {
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return apierrors.NewServiceUnavailable("etcd is busy")
		},
	}).Build()
	h := NewHandler(configtest.Enforcing(), c, c, events.NewFakeRecorder(1))
	resp := serve(t, h, evictionReq(t, "ci", "r", reaper, nil))
	assert.False(t, resp.Allowed)
	assert.Equal(t, int32(http.StatusTooManyRequests), resp.Result.Code, "a drain retries on 429 and gives up on 500")
	assert.Contains(t, resp.Result.Message, "etcd is busy")
}

func TestAReviewsPodFoundInTheRunnerPodCacheIsConfirmedWithoutAGet(t *testing.T) {
	pod := podtest.Runner("ci", "r").Running("runner").Annotate(runnerpod.AllowDelete, "drain").Obj()
	other := podtest.Runner("ci", "r2").Running("runner").Annotate(runnerpod.AllowDelete, "drain").Obj()
	h, rec := newTestHandler(pod, other)
	gets := 0
	h.Reader = interceptor.NewClient(h.Reader.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*metav1.PartialObjectMetadata); ok {
				gets++
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	// The cache holds r (as the watcher's transform leaves it) but not r2,
	// which it has not seen yet.
	h.Pods = fake.NewClientBuilder().WithObjects(pod.DeepCopy()).Build()
	require.True(t, serve(t, h, deleteReq(t, pod, "alice", false, nil)).Allowed)
	assert.Equal(t, 0, gets, "confirmed in the cache")
	assert.NotNil(t, deletionNote(t, h, pod))
	require.True(t, serve(t, h, deleteReq(t, other, "alice", false, nil)).Allowed)
	assert.Equal(t, 1, gets, "a pod the cache lacks is read from the API server")
	assert.NotNil(t, deletionNote(t, h, other))
	assert.Len(t, drain(rec), 2)

	// A forged review naming r with another UID: the cache disagrees, the
	// API server too, and nothing is written.
	forged := pod.DeepCopy()
	forged.Name, forged.UID = "r", "forged-uid"
	serve(t, h, deleteReq(t, forged, "mallory", false, nil))
	assert.Equal(t, 2, gets)
	assert.Nil(t, deletionNote(t, h, forged))
	assert.Empty(t, drain(rec))
}

func TestAnUnlabelledRunnerPodWhoseDeleteGoesOnIsLabelledForTheWatcher(t *testing.T) {
	// Created while the injector was down: no runner label yet.
	pod := podtest.Runner("ci", "r").Running("runner").Annotate(runnerpod.AllowDelete, "drain").Obj()
	h, _ := newTestHandler(pod)
	require.True(t, serve(t, h, deleteReq(t, pod, "alice", false, nil)).Allowed)
	got := &corev1.Pod{}
	require.NoError(t, h.Reader.Get(context.Background(), client.ObjectKeyFromObject(pod), got))
	assert.Equal(t, "true", got.Labels[runnerpod.RunnerLabel])

	// So is one whose runner already died (an OOM before its fleet removes
	// the pod): the watcher records that death only if it sees the pod.
	oom := podtest.GitLab("ci", "oom").Terminated("build", 137, "OOMKilled").Obj()
	h, _ = newTestHandler(oom)
	require.True(t, serve(t, h, deleteReq(t, oom, "manager", false, nil)).Allowed)
	require.NoError(t, h.Reader.Get(context.Background(), client.ObjectKeyFromObject(oom), got))
	assert.Equal(t, "true", got.Labels[runnerpod.RunnerLabel])
	assert.Nil(t, deletionNote(t, h, oom), "a dead runner's deletion names no deleter")

	// A dry run labels nothing.
	dry := podtest.GitLab("ci", "dry").Terminated("build", 137, "OOMKilled").Obj()
	h, _ = newTestHandler(dry)
	require.True(t, serve(t, h, deleteReq(t, dry, "manager", true, nil)).Allowed)
	require.NoError(t, h.Reader.Get(context.Background(), client.ObjectKeyFromObject(dry), got))
	assert.NotContains(t, got.Labels, runnerpod.RunnerLabel)

	// A refused delete leaves that to the labeler: the pod stays.
	busy := podtest.Runner("ci", "busy").Running("runner").Obj()
	h, _ = newTestHandler(busy)
	require.False(t, serve(t, h, deleteReq(t, busy, "reaper", false, nil)).Allowed)
	require.NoError(t, h.Reader.Get(context.Background(), client.ObjectKeyFromObject(busy), got))
	assert.NotContains(t, got.Labels, runnerpod.RunnerLabel)
}

// deletingEphemeralRunner is pod r's EphemeralRunner once its deletion
// began, holding the finalizers given.
func deletingEphemeralRunner(status map[string]any, finalizers ...string) *unstructured.Unstructured {
	er := ephemeralRunner("r", status)
	er.SetFinalizers(finalizers)
	er.SetDeletionTimestamp(&metav1.Time{Time: podtest.Start})
	return er
}

func ephemeralRunnerDeleteReq(t testing.TB, er *unstructured.Unstructured, user string, dryRun bool) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Delete, Namespace: er.GetNamespace(), Name: er.GetName(),
		Resource: metav1.GroupVersionResource{Group: "actions.github.com", Version: "v1alpha1", Resource: "ephemeralrunners"},
		UserInfo: authenticationv1.UserInfo{Username: user}, DryRun: &dryRun, OldObject: raw(t, er.Object),
	}}
}

func TestAnEphemeralRunnersDeletionIsNotedOnceItShows(t *testing.T) {
	finalizers := []string{"ephemeralrunner.actions.github.com/finalizer", arcscaleset.RegistrationFinalizer}
	before := ephemeralRunner("r", map[string]any{"jobRequestId": int64(7)})
	before.SetFinalizers(finalizers)
	cases := []struct {
		name   string
		live   client.Object
		dryRun bool
		noted  bool
	}{
		{name: "the deletion the API server carried out is noted with its requester", live: deletingEphemeralRunner(map[string]any{"jobRequestId": int64(7)}, finalizers...), noted: true},
		{name: "a dry run notes nothing", live: deletingEphemeralRunner(nil, finalizers...), dryRun: true},
		{name: "a review of an EphemeralRunner that is not being deleted (not sent by the API server) notes nothing", live: before.DeepCopy()},
		{name: "an EphemeralRunner already gone notes nothing: it leaves no pod for ARC to delete"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var objs []client.Object
			if tc.live != nil {
				objs = append(objs, tc.live)
			}
			h, rec := newTestHandler(objs...)
			resp := serveRecord(t, h, ephemeralRunnerDeleteReq(t, before, reaper, tc.dryRun))
			assert.True(t, resp.Allowed, "an EphemeralRunner's deletion is never refused")
			h.Wait()
			n := &v1alpha1.RunnerDeletion{}
			err := h.Reader.Get(context.Background(), client.ObjectKey{Namespace: "ci", Name: "er-r"}, n)
			if !tc.noted {
				assert.True(t, apierrors.IsNotFound(err), "no note: %v", err)
				return
			}
			require.NoError(t, err)
			n.Deletion.Time = metav1.Time{}
			assert.Equal(t, v1alpha1.DeletionNote{Kind: "EphemeralRunner", Pod: "r", UID: "er-r", Requester: reaper, Operation: "delete",
				Job: &v1alpha1.Job{RequestID: "7", Source: "EphemeralRunner/r"}}, n.Deletion, "noted with the job its status names")
			assert.Empty(t, drain(rec))
		})
	}
}

func TestARCsDeleteOfARunnerWhoseJobIsOverPassesAndNamesWhoStartedIt(t *testing.T) {
	const arc = "system:serviceaccount:arc-systems:arc-gha-rs-controller"
	pod := podtest.ARCScaleSet("ci", "r").Running("runner").Obj()
	erNote := &v1alpha1.RunnerDeletion{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "er-r"},
		Deletion: v1alpha1.DeletionNote{Kind: "EphemeralRunner", Pod: "r", UID: "er-r", Requester: reaper, Operation: "delete"}}
	// ARC removed its registration finalizer: the service accepted
	// RemoveRunner. The job id stays in the status: ARC never clears it.
	er := deletingEphemeralRunner(map[string]any{"jobRequestId": int64(7)}, "ephemeralrunner.actions.github.com/finalizer")
	h, rec := newTestHandler(pod, er, erNote)
	resp := serve(t, h, deleteReq(t, pod, arc, false, nil))
	require.True(t, resp.Allowed, resp.Result.Message)
	assert.Empty(t, drain(rec), "ARC at its normal work gets no Event")
	n := deletionNote(t, h, pod)
	require.NotNil(t, n)
	assert.Equal(t, arc, n.Requester)
	assert.Equal(t, "job-over", n.Rule)
	assert.Equal(t, reaper, n.StartedBy)
	require.NotNil(t, n.Job, "the note keeps the job the EphemeralRunner named, for the record written after ARC deletes it")
	assert.Equal(t, "7", n.Job.RequestID)
}

// ARC's scale-down of an idle runner: its EphemeralRunner never named a
// job, so the delete is noted under rule idle, naming who deleted the
// EphemeralRunner, and the note names no job.
func TestARCsRemovalOfAnIdleRunnerIsNotedIdle(t *testing.T) {
	const arc = "system:serviceaccount:arc-systems:arc-gha-rs-controller"
	pod := podtest.ARCScaleSet("ci", "r").Running("runner").Obj()
	erNote := &v1alpha1.RunnerDeletion{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "er-r"},
		Deletion: v1alpha1.DeletionNote{Kind: "EphemeralRunner", Pod: "r", UID: "er-r", Requester: "system:serviceaccount:arc-systems:arc-listener", Operation: "delete"}}
	er := deletingEphemeralRunner(map[string]any{"phase": "Running"}, "ephemeralrunner.actions.github.com/finalizer")
	h, rec := newTestHandler(pod, er, erNote)
	resp := serve(t, h, deleteReq(t, pod, arc, false, nil))
	require.True(t, resp.Allowed, resp.Result.Message)
	assert.Empty(t, drain(rec))
	n := deletionNote(t, h, pod)
	require.NotNil(t, n)
	assert.Equal(t, "idle", n.Rule)
	assert.Equal(t, "system:serviceaccount:arc-systems:arc-listener", n.StartedBy)
	assert.Nil(t, n.Job)
}

// lateNote is a reader to which the note named late shows only from its
// misses+1st read on: the EphemeralRunner's note, written after its own
// review's answer, landing after ARC's finalizer already deleted the pod
// (seen on the real fleet under load).
type lateNote struct {
	client.Reader
	late   string
	misses atomic.Int32
}

func (r *lateNote) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*v1alpha1.RunnerDeletion); ok && key.Name == r.late && r.misses.Add(-1) >= 0 {
		return apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("runnerdeletions").GroupResource(), key.Name)
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

func TestTheIdleRemovalsNoteWaitsForTheEphemeralRunnersNoteToNameWhoStartedIt(t *testing.T) {
	const arc = "system:serviceaccount:arc-systems:arc-gha-rs-controller"
	pod := podtest.ARCScaleSet("ci", "r").Running("runner").Obj()
	erNote := &v1alpha1.RunnerDeletion{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "er-r"},
		Deletion: v1alpha1.DeletionNote{Kind: "EphemeralRunner", Pod: "r", UID: "er-r", Requester: arc, Operation: "delete"}}
	er := deletingEphemeralRunner(map[string]any{"phase": "Running"}, "ephemeralrunner.actions.github.com/finalizer")
	h, _ := newTestHandler(pod, er, erNote)
	late := &lateNote{Reader: h.Reader, late: "er-r"}
	late.misses.Store(2)
	h.Reader = late
	resp := serve(t, h, deleteReq(t, pod, arc, false, nil))
	require.True(t, resp.Allowed, resp.Result.Message)
	n := deletionNote(t, h, pod)
	require.NotNil(t, n)
	assert.Equal(t, "idle", n.Rule)
	assert.Equal(t, arc, n.StartedBy, "the EphemeralRunner's note, read once it landed")
	assert.Less(t, late.misses.Load(), int32(0), "read past its misses")
}

func TestARefusalWhileTheEphemeralRunnerIsBeingDeletedNamesWhoDeletedItAndAdvisesNoOverride(t *testing.T) {
	pod := podtest.ARCScaleSet("ci", "r").Running("runner").Obj()
	erNote := &v1alpha1.RunnerDeletion{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "er-r"},
		Deletion: v1alpha1.DeletionNote{Kind: "EphemeralRunner", Pod: "r", UID: "er-r", Requester: "alice@example.com", Operation: "delete"}}
	// The service refused RemoveRunner (JobStillRunning): the finalizer stays.
	er := deletingEphemeralRunner(map[string]any{"jobRequestId": int64(7)}, "ephemeralrunner.actions.github.com/finalizer", arcscaleset.RegistrationFinalizer)
	h, rec := newTestHandler(pod, er, erNote)
	resp := serve(t, h, deleteReq(t, pod, reaper, false, nil))
	require.False(t, resp.Allowed)
	assert.Contains(t, resp.Result.Message, "its EphemeralRunner is being deleted")
	got := drain(rec)
	require.Len(t, got, 1)
	assert.Contains(t, got[0], "refused delete by "+reaper+`: runner "runner" is busy with a job (running since 2026-11-01T12:00:00Z; job "7"; protection ends at 2026-11-08T12:00:00Z); its EphemeralRunner is being deleted, requested by alice@example.com: ARC deletes this pod itself once the Actions service accepts the runner's removal, which it does when the job ends`)
	assert.NotContains(t, got[0], runnerpod.AllowDelete)
}

// A build pod that missed the injector: its manager, with its own pod's
// token, ends it with a Warning Event naming it; a reaper with edit is
// refused as for any busy runner.
func TestAnUnrecordedOwnersDeleteIsAllowedToTheManagersTokenOnly(t *testing.T) {
	const manager = "system:serviceaccount:gitlab:runner"
	pod := podtest.GitLab("ci", "g").Running("build").Obj()
	managerPod := podtest.Plain("gitlab", "gitlab-runner-0").Running("runner").Obj()
	t.Run("the manager's own pod's token", func(t *testing.T) {
		h, rec := newTestHandler(pod, managerPod)
		req := deleteReq(t, pod, manager, false, nil)
		req.UserInfo.Extra = map[string]authenticationv1.ExtraValue{serviceaccount.PodNameKey: {managerPod.Name}}
		resp := serve(t, h, req)
		require.True(t, resp.Allowed, resp.Result.Message)
		got := drain(rec)
		require.Len(t, got, 1)
		assert.Contains(t, got[0], "Warning JobOwnerUnknown delete by "+manager+" allowed: the job's owner was not recorded")
		assert.Contains(t, got[0], "bound to pod gitlab/gitlab-runner-0, which runs no job")
		assert.Contains(t, got[0], "name it in presets[gitlab].ownerPrincipals")
		n := deletionNote(t, h, pod)
		require.NotNil(t, n)
		assert.Equal(t, "owner-unknown", n.Rule)
	})
	t.Run("a reaper", func(t *testing.T) {
		h, rec := newTestHandler(pod, managerPod)
		resp := serve(t, h, deleteReq(t, pod, reaper, false, nil))
		require.False(t, resp.Allowed)
		assert.Contains(t, resp.Result.Message, "only a token bound to a pod that runs no job (the manager's) shows its job's owner")
		got := drain(rec)
		require.Len(t, got, 1)
		assert.Contains(t, got[0], "Warning DeleteRefused refused delete by "+reaper)
	})
}

func TestTheRunnersBoundPodDecidesItsWorkflowPodsOwnership(t *testing.T) {
	const runner = "system:serviceaccount:ci:arc-runner-kube-mode"
	pod := podtest.ARCWorkflow("ci", "arc-r1").Running("job").Annotate(runnerpod.CreatedBy, runner).Obj()
	for name, tc := range map[string]struct {
		extra   map[string]authenticationv1.ExtraValue
		allowed bool
		event   string
	}{
		"the runner's own pod's token ends its job": {
			extra:   map[string]authenticationv1.ExtraValue{serviceaccount.PodNameKey: {"arc-r1"}, serviceaccount.PodUIDKey: {"uid-1"}},
			allowed: true},
		"another runner's token is refused, and the Event says why": {
			extra: map[string]authenticationv1.ExtraValue{serviceaccount.PodNameKey: {"arc-r2"}},
			event: `Warning DeleteRefused refused delete by ` + runner + `: runner "job" is busy (running since 2026-11-01T12:00:00Z; protection ends at 2026-11-06T12:00:00Z); ` + runner + ` is named as the job's owner but is a ServiceAccount of the pod's own namespace`},
		"the runner's name without a pod claim (impersonated) is refused": {
			event: "its token is bound to no pod"},
		"two pod names are no claim": {
			extra: map[string]authenticationv1.ExtraValue{serviceaccount.PodNameKey: {"arc-r1", "arc-r2"}},
			event: "its token is bound to no pod"},
	} {
		t.Run(name, func(t *testing.T) {
			h, rec := newTestHandler(pod)
			req := deleteReq(t, pod, runner, false, nil)
			req.UserInfo.Extra = tc.extra
			resp := serve(t, h, req)
			require.Equal(t, tc.allowed, resp.Allowed, resp.Result.Message)
			if tc.allowed {
				assert.Empty(t, drain(rec))
				return
			}
			got := drain(rec)
			require.Len(t, got, 1)
			assert.Contains(t, got[0], tc.event)
			assert.Contains(t, resp.Result.Message, `not to the workflow pod's runner pod "arc-r1"`)
		})
	}
}

// GitLab's manager in its build pods' namespace acts with its own pod's
// token, a pod that runs no job; a job running as the manager's
// ServiceAccount acts with its build pod's token. Without the runner pods'
// cache the handler reads the bound pod; with it, a pod the cache does not
// hold runs no job.
func TestTheManagersOwnPodTokenEndsItsJobAndABuildPodsDoesNot(t *testing.T) {
	const manager = "system:serviceaccount:ci:gitlab-runner"
	pod := podtest.GitLab("ci", "g").Running("build").Annotate(runnerpod.CreatedBy, manager).Obj()
	managerPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "gitlab-runner-7d9f"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "gitlab-runner"}}}}
	other := podtest.GitLab("ci", "other-job").Running("build").Label(runnerpod.RunnerLabel, "true").Obj()
	for name, tc := range map[string]struct {
		bound   string
		cached  bool
		allowed bool
	}{
		"the manager's own pod's token, read from the API server":      {bound: managerPod.Name, allowed: true},
		"the manager's own pod's token, not in the runner pods' cache": {bound: managerPod.Name, cached: true, allowed: true},
		"another job's build pod's token, read from the API server":    {bound: other.Name},
		"another job's build pod's token, in the runner pods' cache":   {bound: other.Name, cached: true},
		"a token bound to a pod that does not exist":                   {bound: "gone"},
	} {
		t.Run(name, func(t *testing.T) {
			h, _ := newTestHandler(pod, managerPod, other)
			if tc.cached {
				// The runner pods' cache holds the labelled runner pods only.
				cache, _ := newTestHandler(other)
				h.Pods = cache.Reader
			}
			req := deleteReq(t, pod, manager, false, nil)
			req.UserInfo.Extra = map[string]authenticationv1.ExtraValue{serviceaccount.PodNameKey: {tc.bound}}
			resp := serve(t, h, req)
			require.Equal(t, tc.allowed, resp.Allowed, resp.Result.Message)
		})
	}
}

func TestWarnModeTellsTheOperatorTheManagerWouldBeRefused(t *testing.T) {
	const manager = "system:serviceaccount:ci:gitlab-runner"
	pod := podtest.GitLab("ci", "g").Running("build").Annotate(runnerpod.CreatedBy, manager).Obj()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ci", Labels: map[string]string{runnerpod.ModeLabel: "warn"}}}
	h, rec := newTestHandler(pod, ns)
	h.Namespaces = h.Reader
	resp := serve(t, h, deleteReq(t, pod, manager, false, nil))
	require.True(t, resp.Allowed)
	require.Len(t, resp.Warnings, 1)
	assert.Contains(t, resp.Warnings[0], "presets.gitlab.ownerInRunnerNamespace: true")
	got := drain(rec)
	require.Len(t, got, 1)
	assert.Contains(t, got[0], `enforce mode would refuse it; `+manager+` is named as the job's owner but is a ServiceAccount of the pod's own namespace`)
}

// Answering first, the handler returns a refusal before it confirms the
// review's pod or writes the Event: both follow, and a forged review still
// writes nothing.
func TestARefusalIsAnsweredBeforeItsPodIsConfirmedAndItsEventWritten(t *testing.T) {
	pod := podtest.Runner("ci", "busy").Running("runner").Obj()
	h, rec := newTestHandler(pod)
	release := make(chan struct{})
	h.Reader = interceptor.NewClient(h.Reader.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			<-release // the confirming read waits until the answer is in
			return c.Get(ctx, key, obj, opts...)
		},
	})
	resp := h.Handle(context.Background(), deleteReq(t, pod, reaper, false, nil))
	require.False(t, resp.Allowed, "answered while the confirming read is held")
	assert.Empty(t, drain(rec), "no Event before the pod is confirmed")
	close(release)
	h.Wait()
	events := drain(rec)
	require.Len(t, events, 1)
	assert.Contains(t, events[0], "DeleteRefused")

	forged := pod.DeepCopy()
	forged.UID = "forged-uid"
	require.False(t, h.Handle(context.Background(), deleteReq(t, forged, "mallory", false, nil)).Allowed)
	h.Wait()
	assert.Empty(t, drain(rec), "a review of a pod that is not there with its UID writes no Event")
}

// An admitted deletion of an unlabelled runner pod labels it before the
// answer (the named exception, labelBeforeAnswer): the watcher must see it
// before it goes.
func TestAnUnlabelledRunnerPodIsLabelledBeforeTheAnswer(t *testing.T) {
	pod := podtest.Runner("ci", "r").Running("runner").Annotate(runnerpod.AllowDelete, "drain").Obj()
	h, _ := newTestHandler(pod)
	require.True(t, h.Handle(context.Background(), deleteReq(t, pod, "alice", false, nil)).Allowed)
	got := &corev1.Pod{}
	require.NoError(t, h.Reader.Get(context.Background(), client.ObjectKeyFromObject(pod), got))
	assert.Equal(t, "true", got.Labels[runnerpod.RunnerLabel], "labelled when Handle returns")
}

// Answering first, an allowed deletion can be applied before the work
// after the answer runs: the review's pod is confirmed before the answer,
// so finding it terminating afterwards does not drop its deletion note.
func TestAnAllowedDeletionIsNotedThoughItsPodIsTerminatingByTheTimeTheWorkAfterTheAnswerRuns(t *testing.T) {
	pod := podtest.Runner("ci", "r").Running("runner").Label(runnerpod.RunnerLabel, "true").Annotate(runnerpod.AllowDelete, "drain").Obj()
	h, _ := newTestHandler(pod)
	var answered atomic.Bool
	h.Pods = interceptor.NewClient(fake.NewClientBuilder().WithObjects(pod.DeepCopy()).Build(), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if answered.Load() { // the API server has applied the deletion
				obj.SetDeletionTimestamp(&metav1.Time{Time: podtest.Start.Add(5 * time.Minute)})
			}
			return nil
		},
	})
	require.True(t, h.Handle(context.Background(), deleteReq(t, pod, "alice", false, nil)).Allowed)
	answered.Store(true)
	h.Wait()
	n := deletionNote(t, h, pod)
	require.NotNil(t, n, "the deleter is noted")
	assert.Equal(t, "alice", n.Requester)
}

// A replica that is stopped finishes the work its answers started.
func TestAStoppedReplicaFinishesWhatItsAnswersStarted(t *testing.T) {
	a := newAfterAnswer(1)
	release, done := make(chan struct{}), make(chan struct{})
	a.do(context.Background(), func(context.Context) { <-release; close(done) })
	ctx, stop := context.WithCancel(context.Background())
	stop()
	started := make(chan error)
	go func() { started <- a.Start(ctx) }()
	select {
	case <-started:
		t.Fatal("Start returned with work in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	require.NoError(t, <-started)
	<-done
}

// The whole answer is sent before the work after it starts. With every
// slot busy that work runs on the review's own request, and here it waits
// until the client has read the whole answer: an answer still open (sent
// in chunks, its end written only when the handler returns) would never
// be read to its end.
func TestTheWholeAnswerIsSentBeforeTheWorkAfterItStarts(t *testing.T) {
	pod := podtest.Runner("ci", "busy").Running("runner").Obj()
	h, rec := newTestHandler(pod)
	h.after = newAfterAnswer(0)
	read := make(chan struct{})
	h.Reader = interceptor.NewClient(h.Reader.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			select {
			case <-read:
			case <-time.After(time.Minute):
				return errors.New("the confirming read started before the answer was read")
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	srv := httptest.NewServer(h.after.serve(h.Review))
	defer srv.Close()
	req := deleteReq(t, pod, reaper, false, nil)
	review, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  &req.AdmissionRequest,
	})
	require.NoError(t, err)
	resp, err := srv.Client().Post(srv.URL, "application/json", bytes.NewReader(review))
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	close(read)
	assert.Equal(t, int64(len(body)), resp.ContentLength, "sent with its length")

	var answer admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(body, &answer))
	require.NotNil(t, answer.Response)
	assert.False(t, answer.Response.Allowed)
	h.Wait()
	events := drain(rec)
	require.Len(t, events, 1, "the work after the answer ran")
	assert.Contains(t, events[0], "DeleteRefused")
}

// A manager outside the cluster, or with one long-lived token, deletes
// with the token it created the build pod with; a token minted anew for
// its ServiceAccount (as edit in the namespace may) is refused, with an
// Event saying what to set and the owner-not-taken counter.
func TestTheCreatorsOwnCredentialEndsItsJobAndAMintedOneIsRefused(t *testing.T) {
	const manager = "system:serviceaccount:ci:gitlab-runner"
	pod := podtest.GitLab("ci", "g").Running("build").Annotate(runnerpod.CreatedBy, manager).Annotate(runnerpod.CreatedWith, "JTI=manager").Obj()
	for name, tc := range map[string]struct {
		credential string
		allowed    bool
	}{
		"the token the pod was created with": {credential: "JTI=manager", allowed: true},
		"a token minted anew":                {credential: "JTI=minted"},
		"no credential (impersonated)":       {},
	} {
		t.Run(name, func(t *testing.T) {
			h, rec := newTestHandler(pod)
			req := deleteReq(t, pod, manager, false, nil)
			if tc.credential != "" {
				req.UserInfo.Extra = map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/credential-id": {tc.credential}}
			}
			counted := ownersNotTaken.WithLabelValues(string(gitlab.Name), string(Delete), "deny")
			before := testutil.ToFloat64(counted)
			resp := serve(t, h, req)
			require.Equal(t, tc.allowed, resp.Allowed, resp.Result.Message)
			if tc.allowed {
				assert.Empty(t, drain(rec))
				assert.Equal(t, before, testutil.ToFloat64(counted))
				return
			}
			got := drain(rec)
			require.Len(t, got, 1)
			assert.Contains(t, got[0], "Warning DeleteRefused refused delete by "+manager)
			assert.Contains(t, got[0], "presets.gitlab.ownerInRunnerNamespace: true")
			assert.Equal(t, before+1, testutil.ToFloat64(counted))
		})
	}
}

func TestAnEvictionPastItsNodesDrainDeadlineIsNotedWithWhoSetIt(t *testing.T) {
	pod := podtest.Runner("ci", "r").Node("node-7").Running("runner").Obj()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-7", Annotations: map[string]string{
		runnerpod.DrainDeadline: podtest.Start.Add(time.Minute).Format(time.RFC3339), runnerpod.DrainDeadlineBy: "alice"}}}
	h, rec := newTestHandler(pod, node)
	resp := serve(t, h, evictionReq(t, "ci", "r", "system:serviceaccount:kube-system:upgrader", nil))
	require.True(t, resp.Allowed, resp.Result.Message)
	assert.Equal(t, []string{"runnerguard: deleting a busy runner pod (allowed by node node-7's runnerguard.io/drain-deadline 2026-11-01T12:01:00Z, set by alice)"}, resp.Warnings)
	n := deletionNote(t, h, pod)
	require.NotNil(t, n)
	assert.Equal(t, "node-drain-deadline", n.Rule)
	assert.Equal(t, "system:serviceaccount:kube-system:upgrader", n.Requester)
	assert.Equal(t, "alice", n.StartedBy, "the deadline's setter started what the eviction carries out")
	assert.Contains(t, drain(rec), "Normal DrainDeadlinePassed eviction by system:serviceaccount:kube-system:upgrader allowed by node node-7's runnerguard.io/drain-deadline 2026-11-01T12:01:00Z, set by alice")

	// Before the deadline the same eviction waits.
	h.Now = func() time.Time { return podtest.Start }
	resp = serve(t, h, evictionReq(t, "ci", "r", "system:serviceaccount:kube-system:upgrader", nil))
	assert.False(t, resp.Allowed)
	assert.Equal(t, int32(429), resp.Result.Code)
}

// The chart's registrations choose the mode in the API server and call the
// guard at the mode's path: the guard answers in that mode, whatever its
// config or the namespace's label says, so a switch needs no restart.
func TestTheGuardAnswersInTheModeOfTheRegistrationThatCalled(t *testing.T) {
	pod := podtest.Runner("ci", "r").Running("runner").Obj()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ci", Labels: map[string]string{runnerpod.ModeLabel: "enforce"}}}
	h, _ := newTestHandler(pod, ns)
	h.Namespaces = h.Reader
	for _, tc := range []struct {
		mode    config.Mode
		allowed bool
	}{{config.ModeWarn, true}, {config.ModeEnforce, false}} {
		ctx := context.WithValue(context.Background(), modeKey{}, tc.mode)
		resp := h.Handle(ctx, deleteReq(t, pod, reaper, false, nil))
		assert.Equal(t, tc.allowed, resp.Allowed, "called by the %s registration", tc.mode)
	}
	assert.Equal(t, "/validate-runner-pod/warn", ModePath(config.ModeWarn))
	assert.False(t, serve(t, h, deleteReq(t, pod, reaper, false, nil)).Allowed, "the legacy path reads the label")
}

// With the nodes' metadata cache (the watcher's), a busy runner's node is
// read there: a refusal's answer waits on no request to the API server,
// and a deadline the cache holds still lets the runner go.
func TestABusyRunnersNodeIsReadFromTheNodesCacheNotTheAPIServer(t *testing.T) {
	pod := podtest.Runner("ci", "r").Node("node-7").Running("runner").Obj()
	h, _ := newTestHandler(pod)
	nodeReads := 0
	h.Reader = interceptor.NewClient(h.Reader.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Node); ok {
				nodeReads++
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-7"}}
	h.Nodes = fake.NewClientBuilder().WithObjects(node).Build()
	resp := serve(t, h, deleteReq(t, pod, "reaper", false, nil))
	assert.False(t, resp.Allowed, "no deadline on the node: busy")

	node.Annotations = map[string]string{runnerpod.DrainDeadline: podtest.Start.Add(time.Minute).Format(time.RFC3339), runnerpod.DrainDeadlineBy: "alice"}
	stripped, err := StripNode(&metav1.PartialObjectMetadata{ObjectMeta: node.ObjectMeta})
	require.NoError(t, err)
	meta := stripped.(*metav1.PartialObjectMetadata)
	assert.Equal(t, node.Annotations, meta.Annotations, "the cache keeps the deadline and its setter")
	h.Nodes = fake.NewClientBuilder().WithObjects(node).Build()
	resp = serve(t, h, deleteReq(t, pod, "reaper", false, nil))
	assert.True(t, resp.Allowed, "past the deadline the cache holds: %v", resp.Result)

	h.Nodes = fake.NewClientBuilder().Build()
	resp = serve(t, h, deleteReq(t, pod, "reaper", false, nil))
	assert.False(t, resp.Allowed, "a node the cache does not hold states no deadline")
	assert.Zero(t, nodeReads, "no node read from the API server")
}

// An allowed deletion's Event, like its note, is written once the
// deletion shows: not while the API server is still carrying it out.
func TestAnAllowedDeletionsEventWaitsForTheDeletionToShow(t *testing.T) {
	pod := podtest.Runner("ci", "r").Running("runner").Label(runnerpod.RunnerLabel, "true").Annotate(runnerpod.AllowDelete, "drain").Obj()
	h, rec := newTestHandler(pod)
	h.NotesAfterDeletion = true
	var applied atomic.Bool
	h.Pods = interceptor.NewClient(fake.NewClientBuilder().WithObjects(pod.DeepCopy()).Build(), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if applied.Load() {
				obj.SetDeletionTimestamp(&metav1.Time{Time: podtest.Start.Add(5 * time.Minute)})
			}
			return nil
		},
	})
	require.True(t, h.Handle(context.Background(), deleteReq(t, pod, "alice", false, nil)).Allowed)
	time.Sleep(3 * deletion.RetryEvery / 2)
	assert.Empty(t, drain(rec), "no Event while the deletion does not show")
	applied.Store(true)
	h.Wait()
	assert.Len(t, drain(rec), 1, "the Event once it shows")
	assert.NotNil(t, deletionNote(t, h, pod), "and the note")
}
