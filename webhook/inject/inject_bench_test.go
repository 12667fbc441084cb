package inject

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
)

// benchInputs are golden inputs: pods as the API server sends them at
// CREATE, and what the injector does with each.
var benchInputs = []struct{ file, what string }{
	{"generic", "generic runner injected"},
	{"arc-scale-set", "ARC scale-set runner injected"},
	{"already-injected", "instrumented pod unchanged"},
	{"not-runner", "plain pod untouched"},
}

// benchRaw is testdata/<file>.pod.yaml encoded as kube-apiserver encodes
// a pod in a review: encoding/json of the Pod type (e2e/load checks that
// the API server's bytes are exactly that).
func benchRaw(b *testing.B, file string) []byte {
	b.Helper()
	y, err := os.ReadFile(filepath.Join("testdata", file+".pod.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict(y, &pod); err != nil {
		b.Fatal(err)
	}
	raw, err := json.Marshal(&pod)
	if err != nil {
		b.Fatal(err)
	}
	return raw
}

func BenchmarkMutate(b *testing.B) {
	cfg := configtest.Enforcing()
	facts := Facts{Requester: "system:serviceaccount:ci:pool"}
	for _, in := range benchInputs {
		b.Run(in.what, func(b *testing.B) {
			var pod corev1.Pod
			if err := json.Unmarshal(benchRaw(b, in.file), &pod); err != nil {
				b.Fatal(err)
			}
			// Mutate changes its pod, so each call gets a fresh copy,
			// made off the clock in batches.
			const batch = 512
			pods := make([]*corev1.Pod, batch)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i%batch == 0 {
					b.StopTimer()
					for j := range pods {
						pods[j] = pod.DeepCopy()
					}
					b.StartTimer()
				}
				Mutate(pods[i%batch], facts, cfg)
			}
		})
	}
}

// maxReview is the size of the largest review the webhook server admits,
// less a margin (BenchmarkServeHTTPLargestReview).
const maxReview = 4<<20 - 4<<10

// bulky returns raw, a pod, with its first container's env grown until
// the CREATE review around it is just under size bytes.
func bulky(b *testing.B, raw []byte, size int) []byte {
	b.Helper()
	var pod corev1.Pod
	if err := json.Unmarshal(raw, &pod); err != nil {
		b.Fatal(err)
	}
	entry, err := json.Marshal(corev1.EnvVar{Name: "E000000", Value: strings.Repeat("x", 80)})
	if err != nil {
		b.Fatal(err)
	}
	room := size - len(benchCreateReview(b, raw)) - 1<<10
	for i := range room / (len(entry) + 1) {
		pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: fmt.Sprintf("E%06d", i), Value: strings.Repeat("x", 80)})
	}
	out, err := json.Marshal(&pod)
	if err != nil {
		b.Fatal(err)
	}
	if n := len(benchCreateReview(b, out)); n > size {
		b.Fatalf("the review is %d bytes, over %d", n, size)
	}
	return out
}

// benchNamespaces reads namespaces as the manager's cache does: a deep copy
// of the stored metadata, no API call.
type benchNamespaces struct{ ns *metav1.PartialObjectMetadata }

func (r benchNamespaces) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.ns.DeepCopyInto(obj.(*metav1.PartialObjectMetadata))
	return nil
}

func (r benchNamespaces) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return nil
}

// benchCreateReview is the AdmissionReview the API server posts for a pod
// CREATE with raw as the object.
func benchCreateReview(b *testing.B, raw []byte) []byte {
	b.Helper()
	podGVK := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	podGVR := metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	dryRun := false
	opts, err := json.Marshal(metav1.CreateOptions{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "CreateOptions"}})
	if err != nil {
		b.Fatal(err)
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:  "7d3c1f0e-54b6-4f0e-8c38-2f5b0a1e9d21",
			Kind: podGVK, Resource: podGVR, RequestKind: &podGVK, RequestResource: &podGVR,
			Namespace: "ci", Operation: admissionv1.Create,
			UserInfo: authenticationv1.UserInfo{
				Username: "system:serviceaccount:ci:pool", UID: "5f1c0e6a-0d47-4c55-9a55-0c1c6f0d2b11",
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ci", "system:authenticated"},
			},
			Object: runtime.RawExtension{Raw: raw}, Options: runtime.RawExtension{Raw: opts}, DryRun: &dryRun,
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// BenchmarkServeHTTP is one CREATE review end to end as the webhook server
// runs it: controller-runtime's admission.Webhook decodes the JSON body, the
// handler decodes the pod, reads its namespace, mutates and diffs it into a
// JSON patch, and the response is encoded. Logging goes through the
// production logger (zap, JSON, info level) into io.Discard. Beside wall
// time it reports the process's CPU time per review, steadier on a machine
// shared with builds.
func BenchmarkServeHTTP(b *testing.B) {
	cfg := configtest.Enforcing()
	log := zap.New(zap.WriteTo(io.Discard))
	ns := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "ci", Labels: map[string]string{
		"runnerguard.io/enabled": "true", "kubernetes.io/metadata.name": "ci",
	}}}
	for _, in := range benchInputs {
		b.Run(in.what, func(b *testing.B) {
			benchServeCreate(b, cfg, log, ns, benchRaw(b, in.file))
		})
	}
}

// BenchmarkServeHTTPLargestReview is BenchmarkServeHTTP for the largest
// review the webhook server admits (cmd/runnerguard's maxReviewBytes, less
// a margin, as e2e/api's burst of the largest reviews sends): a runner pod
// whose runner container's env fills it. Its allocations are what the
// server's one budget of large reviews lets in at a time. A benchmark of
// its own, run for fewer iterations than the others (make bench).
func BenchmarkServeHTTPLargestReview(b *testing.B) {
	cfg := configtest.Enforcing()
	log := zap.New(zap.WriteTo(io.Discard))
	ns := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "ci", Labels: map[string]string{
		"runnerguard.io/enabled": "true", "kubernetes.io/metadata.name": "ci",
	}}}
	b.Run("generic runner injected", func(b *testing.B) {
		benchServeCreate(b, cfg, log, ns, bulky(b, benchRaw(b, "generic"), maxReview))
	})
}

// benchServeCreate serves the CREATE review of raw b.N times.
func benchServeCreate(b *testing.B, cfg config.Config, log logr.Logger, ns *metav1.PartialObjectMetadata, raw []byte) {
	b.Helper()
	h := NewHandler(cfg, benchNamespaces{ns})
	wh := &admission.Webhook{Handler: h, LogConstructor: func(_ logr.Logger, req *admission.Request) logr.Logger {
		return admission.DefaultLogConstructor(log, req)
	}}
	body := benchCreateReview(b, raw)
	serve := func() *httptest.ResponseRecorder {
		r := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/mutate-runner-pod", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		wh.ServeHTTP(w, r)
		return w
	}
	// One review outside the loop checks that the answer is the
	// injector's: allowed, patched exactly when Mutate changes the pod.
	var got admissionv1.AdmissionReview
	if err := json.Unmarshal(serve().Body.Bytes(), &got); err != nil || got.Response == nil || !got.Response.Allowed {
		b.Fatalf("not allowed or no review in the answer: %v %+v", err, got.Response)
	}
	var pod corev1.Pod
	if err := json.Unmarshal(raw, &pod); err != nil {
		b.Fatal(err)
	}
	before := pod.DeepCopy()
	Mutate(&pod, Facts{Requester: "system:serviceaccount:ci:pool"}, cfg)
	if patched, changes := len(got.Response.Patch) > 0, !reflect.DeepEqual(before, &pod); patched != changes {
		b.Fatalf("patch %s, but Mutate changes the pod: %v", got.Response.Patch, changes)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	cpu := cpuTime()
	b.ResetTimer()
	for range b.N {
		serve()
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
