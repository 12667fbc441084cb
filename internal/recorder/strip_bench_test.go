package recorder

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// fullRunnerPod is an ARC runner pod as the API server returns it: env,
// volumes, resources, managed fields, an ended runner with a 4 KiB
// termination message (FallbackToLogsOnError) and the vitals' final reading.
func fullRunnerPod(i int) *corev1.Pod {
	w := podtest.ARCScaleSet("ci", fmt.Sprintf("runner-set-abcde-runner-%05d", i)).Node("node-1").
		Terminated("runner", 1, "Error").
		SidecarTerminated(runnerpod.VitalsContainer, `{"v":1,"ts":"2026-11-01T12:10:00Z","cg":"v2","oom":0,"oom_kill":0,"peak":1073741824,"limit":4294967296}`).
		Annotate("kubectl.kubernetes.io/last-applied-configuration", string(make([]byte, 2048)))
	pod := w.Obj()
	for j := range 20 {
		pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: fmt.Sprintf("RUNNER_VAR_%d", j), Value: "some-value-of-a-runner-setting"})
	}
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "ephemeralrunner-controller", FieldsV1: &metav1.FieldsV1{Raw: make([]byte, 3000)}}}
	pod.Status.ContainerStatuses[0].State.Terminated.Message = string(make([]byte, 4096))
	return pod
}

// appPod is an ordinary workload pod as the API server returns it: the
// other pods of a cluster, which the watcher's cache used to hold too.
func appPod(i int) *corev1.Pod {
	w := podtest.Plain(fmt.Sprintf("team-%03d", i%300), fmt.Sprintf("web-7d9f8c6b5-%05d", i)).Node(fmt.Sprintf("node-%d", i%100)).Running("app")
	pod := w.Obj()
	pod.Labels = map[string]string{"app": "web", "pod-template-hash": "7d9f8c6b5"}
	for j := range 10 {
		pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: fmt.Sprintf("APP_VAR_%d", j), Value: "some-value"})
	}
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", FieldsV1: &metav1.FieldsV1{Raw: make([]byte, 2000)}}}
	return pod
}

// heapOf is the live heap a store of n runner pods holds, through transform.
func heapOf(b *testing.B, n int, transform func(any) (any, error)) uint64 {
	b.Helper()
	return heapOfPods(b, n, fullRunnerPod, transform)
}

// heapOfPods is the live heap a store of n pods made by pod holds.
func heapOfPods(b *testing.B, n int, pod func(int) *corev1.Pod, transform func(any) (any, error)) uint64 {
	b.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for i := range n {
		obj, err := transform(pod(i))
		if err != nil {
			b.Fatal(err)
		}
		if err := store.Add(obj); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(store)
	return after.HeapAlloc - before.HeapAlloc
}

// BenchmarkCacheMemory reports the watcher's pod cache for 1,000 runner
// pods, as it keeps them and whole (an unstripped cache). A corev1.Pod
// stripped of the same fields took 4,003 bytes a pod.
func BenchmarkCacheMemory(b *testing.B) {
	const pods = 1000
	for _, tc := range []struct {
		name      string
		transform func(any) (any, error)
	}{
		{"cached", compact},
		{"whole", func(o any) (any, error) { return o, nil }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var total uint64
			for range b.N {
				total += heapOf(b, pods, tc.transform)
			}
			b.ReportMetric(float64(total)/float64(b.N)/(1<<20), "MiB/1000pods")
			b.ReportMetric(float64(total)/float64(b.N)/pods, "B/pod")
		})
	}
}

// BenchmarkLeaderCache reports the leader's pod cache in a cluster of 1,000
// runner pods among 20,000 other pods: now (runner pods only, by the runner
// label) and before (every pod of the cluster, stripped).
func BenchmarkLeaderCache(b *testing.B) {
	const runners, others = 1000, 20000
	for _, tc := range []struct {
		name   string
		others int
	}{
		{"runner-pods-only", 0},
		{"every-pod-before", others},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var total uint64
			for range b.N {
				total += heapOf(b, runners, compact) + heapOfPods(b, tc.others, appPod, compact)
			}
			b.ReportMetric(float64(total)/float64(b.N)/(1<<20), "MiB")
		})
	}
}
