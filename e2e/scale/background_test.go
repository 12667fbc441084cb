//go:build scale

package scale

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// otherLabel marks the cluster's other pods: the workloads a fleet's
// runners share the cluster with (50,000 of them at the largest size).
const otherLabel = "sim.runnerguard.io/other"

// others is what creating the other pods took.
type others struct {
	pods, inRunnerNS int
	created, running time.Duration
	cost             cpPhase
}

// otherPod is a plain workload bound to a kwok node: kwok's runner-start
// Stage runs it (it matches any Pending pod) and no Stage ends it.
func otherPod(i int, ns, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%06d", i), Namespace: ns, Labels: map[string]string{otherLabel: "1"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{
			{Name: "app", Image: "example.com/app:1"}, {Name: "proxy", Image: "example.com/proxy:1"}}},
	}
}

// createOthers creates n other pods over nodes with workers clients as
// the admin and waits until kwok runs them all. runnerNS (opted in) must
// exist; the other namespaces are created here.
func createOthers(ctx context.Context, cp controlPlane, n int, nodes []string, runnerNS []string, workers int) (o others, err error) {
	o, admin := others{pods: n}, cp.admin
	if n == 0 {
		return o, nil
	}
	before := cp.take(ctx)
	defer func() { o.cost = phaseOf(before, cp.take(ctx)) }()
	for i := range otherNamespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("other-%02d", i)}}
		if _, err := admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return o, err
		}
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
		if otherPlacement(i, runnerNS) != otherPlacement(i, nil) {
			o.inRunnerNS++
		}
	}
	start := time.Now()
	if errs := parallel(idx, workers, func(i int) error {
		_, err := admin.CoreV1().Pods(otherPlacement(i, runnerNS)).Create(ctx, otherPod(i, otherPlacement(i, runnerNS), nodes[i%len(nodes)]), metav1.CreateOptions{})
		return err
	}); len(errs) > 0 {
		return o, fmt.Errorf("%d creates of other pods failed, first: %w", len(errs), errs[0])
	}
	o.created = since(start)
	// Polled every 2 s: each poll lists the pods kwok has not run yet.
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, scaled(5*time.Minute, n, 20*time.Millisecond), true, func(ctx context.Context) (bool, error) {
		return notRunning(ctx, cp.meta, otherLabel+"=1", "") == 0, nil
	})
	o.running = since(start)
	if err != nil {
		return o, fmt.Errorf("waiting for kwok to run the other pods: %w", err)
	}
	return o, nil
}

// podsInCluster counts every pod, from the watch cache, a page of one:
// the count the API server gives with it is all the report needs.
func podsInCluster(ctx context.Context, admin *kubernetes.Clientset) (int64, error) {
	list, err := admin.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return 0, err
	}
	n := int64(len(list.Items))
	if list.RemainingItemCount != nil {
		n += *list.RemainingItemCount
	}
	return n, nil
}

// scaled is base plus per for each of n: the waits grow with the size.
func scaled(base time.Duration, n int, per time.Duration) time.Duration {
	return base + time.Duration(n)*per
}

// optedIn is a runner namespace, opted in to runnerguard.
func optedIn(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{runnerpod.EnabledNamespaceLabel: "true"}}}
}
