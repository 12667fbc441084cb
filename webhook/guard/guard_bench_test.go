package guard

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
	"github.com/runnerguard/runnerguard/webhook/inject"
)

// benchPods are the pods a guard benchmark judges, as the API server holds
// them: instrumented by the injector, bound to a node.
func benchPods(cfg config.Config) []benchPod {
	instrumented := func(w *podtest.Wrapper) *corev1.Pod {
		pod := w.Node("node-1").Obj()
		inject.Mutate(pod, inject.Facts{Requester: "system:serviceaccount:ci:pool"}, cfg)
		return pod
	}
	return []benchPod{
		{"terminated runner allowed", instrumented(podtest.Runner("ci", "done").Terminated("runner", 0, "Completed"))},
		{"busy runner denied", instrumented(podtest.Runner("ci", "busy").Running("runner"))},
		{"override allowed", instrumented(podtest.Runner("ci", "drain").Running("runner").Annotate(runnerpod.AllowDelete, "node upgrade"))},
		{"plain pod allowed", podtest.Plain("ci", "web").Node("node-1").Running("app").Obj()},
	}
}

type benchPod struct {
	name string
	pod  *corev1.Pod
}

func BenchmarkDecide(b *testing.B) {
	cfg := configtest.Enforcing()
	now := podtest.Start.Add(5 * time.Minute)
	for _, c := range benchPods(cfg) {
		b.Run(c.name, func(b *testing.B) {
			f := Facts{Pod: c.pod, Operation: Delete, Requester: "system:serviceaccount:ci:reaper", Now: now}
			b.ReportAllocs()
			for b.Loop() {
				Decide(f, cfg)
			}
		})
	}
}

// benchDeleteReview is the AdmissionReview the API server posts for a pod
// DELETE: the pod as stored in oldObject, the DeleteOptions in options.
func benchDeleteReview(b *testing.B, pod *corev1.Pod) []byte {
	b.Helper()
	raw := func(v any) k8sruntime.RawExtension {
		out, err := json.Marshal(v)
		if err != nil {
			b.Fatal(err)
		}
		return k8sruntime.RawExtension{Raw: out}
	}
	pod = pod.DeepCopy()
	pod.APIVersion, pod.Kind = "v1", "Pod"
	podGVK := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	podGVR := metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	dryRun := false
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:  "0b0e7a5c-3c4f-4a7e-9b1e-8f4f1c2d3e4f",
			Kind: podGVK, Resource: podGVR, RequestKind: &podGVK, RequestResource: &podGVR,
			Name: pod.Name, Namespace: pod.Namespace, Operation: admissionv1.Delete,
			UserInfo: authenticationv1.UserInfo{
				Username: "system:serviceaccount:ci:reaper", UID: "5f1c0e6a-0d47-4c55-9a55-0c1c6f0d2b11",
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ci", "system:authenticated"},
			},
			OldObject: raw(pod),
			Options:   raw(metav1.DeleteOptions{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "DeleteOptions"}}),
			DryRun:    &dryRun,
		},
	}
	return raw(review).Raw
}

// BenchmarkServeHTTP is one review end to end as the webhook server runs it:
// controller-runtime's admission.Webhook reads and decodes the JSON body,
// the guard decides, and the response is encoded. Logging goes through the
// production logger (zap, JSON, info level) into io.Discard; Events go to a
// recorder that drops them, and death records and deletion notes to a fake
// client, off the review's path as in the server. The first case is the
// floor: the same webhook with a handler that only allows.
func BenchmarkServeHTTP(b *testing.B) {
	cfg := configtest.Enforcing()
	log := zap.New(zap.WriteTo(io.Discard))
	logs := func(_ logr.Logger, req *admission.Request) logr.Logger {
		return admission.DefaultLogConstructor(log, req)
	}
	pods := benchPods(cfg)
	b.Run("floor: a handler that only allows", func(b *testing.B) {
		allow := admission.HandlerFunc(func(context.Context, admission.Request) admission.Response { return admission.Allowed("") })
		benchServe(b, &admission.Webhook{Handler: allow, LogConstructor: logs}, benchDeleteReview(b, pods[0].pod), true)
	})
	for _, c := range pods {
		b.Run(c.name, func(b *testing.B) {
			// Event writes succeed without going anywhere: their cost
			// is the API server's, measured by e2e/load.
			fc := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
				Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error { return nil },
			}).Build()
			h := NewHandler(cfg, fc, fc, &events.FakeRecorder{})
			want := Decide(Facts{Pod: c.pod, Operation: Delete, Now: time.Now()}, cfg).Allowed
			benchServe(b, &admission.Webhook{Handler: h, LogConstructor: logs}, benchDeleteReview(b, c.pod), want)
		})
	}
}

// benchServe serves body to wh b.N times, after checking once that the
// answer is the handler's (allowed as want), not a decoding error. Beside
// wall time it reports the process's CPU time per review, steadier on a
// machine shared with builds.
func benchServe(b *testing.B, wh *admission.Webhook, body []byte, want bool) {
	serve := func() *httptest.ResponseRecorder {
		r := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/validate-runner-pod", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		wh.ServeHTTP(w, r)
		return w
	}
	var got admissionv1.AdmissionReview
	if err := json.Unmarshal(serve().Body.Bytes(), &got); err != nil || got.Response == nil {
		b.Fatalf("no review in the answer: %v", err)
	}
	if got.Response.Allowed != want {
		b.Fatalf("allowed = %v, want %v: %+v", got.Response.Allowed, want, got.Response.Result)
	}
	idle := runtime.NumGoroutine()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	cpu := cpuTime()
	b.ResetTimer()
	for range b.N {
		serve()
	}
	// The handler's writes run on their own goroutines: their cost is
	// the review's, so wait for them on the clock.
	for runtime.NumGoroutine() > idle {
		time.Sleep(10 * time.Microsecond)
	}
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
