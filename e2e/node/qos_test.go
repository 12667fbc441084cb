//go:build node

package node

import (
	"context"
	"fmt"
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
func plainNamespace(t *testing.T) string {
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
func run(t *testing.T, pod *corev1.Pod) timeline {
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

// What the sidecar costs a runner's start and end on the real node:
// rounds of the same Burstable runner with and without it, in turn. The
// figures are logged for docs/performance/cost.md, not asserted: they depend on the
// machine.
func TestWhatTheSidecarAddsToARunnersStartAndEnd(t *testing.T) {
	const rounds = 5
	served, plain := newNamespace(t), plainNamespace(t)
	var with, without []timeline
	for i := range rounds {
		without = append(without, run(t, shaped(plain, fmt.Sprintf("plain-%d", i), corev1.PodQOSBurstable)))
		with = append(with, run(t, shaped(served, fmt.Sprintf("instrumented-%d", i), corev1.PodQOSBurstable)))
	}
	median := func(tls []timeline, f func(timeline) time.Duration) time.Duration {
		d := make([]time.Duration, len(tls))
		for i, tl := range tls {
			d[i] = f(tl)
		}
		slices.Sort(d)
		return d[len(d)/2].Round(time.Millisecond)
	}
	startup := func(tl timeline) time.Duration { return tl.running }
	end := func(tl timeline) time.Duration { return tl.done - tl.ended }
	t.Logf("median of %d rounds, create to runner running: without the sidecar %s, with it %s", rounds, median(without, startup), median(with, startup))
	t.Logf("median of %d rounds, runner ended to pod Succeeded: without the sidecar %s, with it %s", rounds, median(without, end), median(with, end))
	for i := range rounds {
		t.Logf("round %d: without %s / %s, with %s / %s", i, without[i].running.Round(time.Millisecond), end(without[i]).Round(time.Millisecond),
			with[i].running.Round(time.Millisecond), end(with[i]).Round(time.Millisecond))
	}
}
