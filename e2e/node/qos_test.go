//go:build node

package node

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/runnerguard/runnerguard/webhook/inject"
)

// plainNamespace makes a namespace that did not opt in, deleted after the
// test.
func plainNamespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "plain-" + strings.ToLower(rand.String(6))}}
	require.NoError(t, admin.Create(context.Background(), ns))
	t.Cleanup(func() { _ = admin.Delete(context.Background(), ns) })
	return ns.Name
}

// shaped is a runner pod running a short job with the resources of a QoS
// class: small, so six fit on the one node beside the suite's others.
func shaped(ns, name string, class corev1.PodQOSClass) *corev1.Pod {
	p := runnerPod(ns, name, "64Mi", "job", "1")
	r := &p.Spec.Containers[0].Resources
	small := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	switch class {
	case corev1.PodQOSGuaranteed:
		r.Requests, r.Limits = small, small.DeepCopy()
	case corev1.PodQOSBurstable:
		r.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("32Mi")}
		r.Limits = small
	case corev1.PodQOSBestEffort:
		r.Requests, r.Limits = nil, nil
	}
	return p
}

// The kubelet treats an instrumented runner as it treats the same pod
// uninstrumented: status.qosClass, and so its eviction rank, OOM score and
// CPU manager policy, are the same.
func TestAnInstrumentedRunnerKeepsItsQoSClass(t *testing.T) {
	served, plain := newNamespace(t), plainNamespace(t)
	for _, class := range []corev1.PodQOSClass{corev1.PodQOSGuaranteed, corev1.PodQOSBurstable, corev1.PodQOSBestEffort} {
		t.Run(string(class), func(t *testing.T) {
			name := strings.ToLower(string(class))
			want := start(t, shaped(plain, name, class))
			got := start(t, shaped(served, name, class))
			require.True(t, slices.ContainsFunc(got.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == inject.ContainerName }), "instrumented")
			assert.Equal(t, class, want.Status.QOSClass, "the uninstrumented pod's class")
			assert.Equal(t, want.Status.QOSClass, got.Status.QOSClass)
			finishedAs := waitPod(t, got, "the job to finish", 60*time.Second, finished)
			assert.Equal(t, corev1.PodSucceeded, finishedAs.Status.Phase)
		})
	}
}

// timeline is when a runner pod reached each point, from just before its
// CREATE, as seen by a watch.
type timeline struct{ running, ended, done time.Duration }

// run creates pod and follows it to its end.
func run(t testing.TB, pod *corev1.Pod) timeline {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	w, err := cs.CoreV1().Pods(pod.Namespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + pod.Name})
	require.NoError(t, err)
	defer w.Stop()
	begin := time.Now()
	require.NoError(t, admin.Create(ctx, pod))
	var tl timeline
	for ev := range w.ResultChan() {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			continue
		}
		s := containerStatus(p, "runner")
		if tl.running == 0 && s != nil && (s.State.Running != nil || s.State.Terminated != nil) {
			tl.running = time.Since(begin)
		}
		if tl.ended == 0 && s != nil && s.State.Terminated != nil {
			tl.ended = time.Since(begin)
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			tl.done = time.Since(begin)
			require.Equal(t, corev1.PodSucceeded, p.Status.Phase)
			return tl
		}
	}
	require.Fail(t, "the watch ended before the pod did", "%s/%s", pod.Namespace, pod.Name)
	return tl
}

// BenchmarkSidecarStartAndEnd is what the sidecar costs a runner's start
// and end on the real node: the same Burstable runner without the sidecar
// (a namespace that did not opt in) and with it, reported per runner as
// milliseconds from CREATE to the runner running and from the runner's end
// to the pod's Succeeded. Figures depend on the machine, so they are a
// benchmark's, not a test's; docs/performance says how to run it.
func BenchmarkSidecarStartAndEnd(b *testing.B) {
	served, plain := newNamespace(b), plainNamespace(b)
	for _, c := range []struct{ name, ns string }{{"without", plain}, {"with", served}} {
		b.Run(c.name, func(b *testing.B) {
			var startup, end time.Duration
			for range b.N {
				tl := run(b, shaped(c.ns, c.name+"-"+strings.ToLower(rand.String(6)), corev1.PodQOSBurstable))
				startup += tl.running
				end += tl.done - tl.ended
			}
			b.ReportMetric(float64(startup.Milliseconds())/float64(b.N), "ms-to-running/op")
			b.ReportMetric(float64(end.Milliseconds())/float64(b.N), "ms-end-to-succeeded/op")
		})
	}
}
