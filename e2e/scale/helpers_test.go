//go:build scale

package scale

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// took keeps how long a request started at start took, under the lock.
func (r *run) took(into *[]time.Duration, start time.Time) {
	d := time.Since(start)
	r.mu.Lock()
	defer r.mu.Unlock()
	*into = append(*into, d)
}

// count updates the chaos counters under the run's lock.
func (r *run) count(f func(*chaos)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.chaos)
}

func nodeIndex(name string) int {
	var i int
	_, _ = fmt.Sscanf(name, "kwok-%04d", &i)
	return i
}

func readyNodes(ctx context.Context, c *kubernetes.Clientset) int {
	list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: nodeLabel + "=kwok"})
	if err != nil {
		return 0
	}
	n := 0
	for _, node := range list.Items {
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n
}

func runningPods(ctx context.Context, c *kubernetes.Clientset) int {
	list, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: fleetLabel + "=1"})
	if err != nil {
		return 0
	}
	n := 0
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodRunning {
			n++
		}
	}
	return n
}
