//go:build scale

package scale

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/recorder"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// The budget designs TestBudgetsCost weighs, each in a namespace of its
// own with the same pods.
const (
	// perPod is runnerguard's design until 2026-12: a budget per busy
	// runner (oldBudget), its pod labelled with its UID.
	perPod = "budget-per-pod"
	// shared is runnerguard's since: one budget a namespace
	// (recorder.Budget) over the pods labelled held.
	shared = "budget-shared"
	// unguarded has no budget: the floor.
	unguarded = "budget-none"
)

// oldBudget is the per-pod design's budget of pod: minAvailable 1 of the
// one pod labelled with its UID, owned by the pod.
func oldBudget(pod *corev1.Pod) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pod.Namespace, Name: "runnerguard-" + string(pod.UID),
			Labels:          map[string]string{"app.kubernetes.io/managed-by": recorder.BudgetManagedBy},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}},
		},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable:               ptr.To(intstr.FromInt32(1)),
			Selector:                   &metav1.LabelSelector{MatchLabels: map[string]string{runnerpod.BudgetLabel: string(pod.UID)}},
			UnhealthyPodEvictionPolicy: ptr.To(policyv1.IfHealthyBudget),
		},
	}
}

// TestBudgetsCost measures what the budgets cost the cluster, the real
// kube-apiserver, etcd and kube-controller-manager's disruption
// controller, with BUDGET_RUNNERS busy runner pods (kwok's) in each
// design's namespace: refused and allowed evictions' round trips and the
// API server's CPU per eviction (the eviction API lists every budget of
// the pod's namespace), and the disruption controller's work and its
// CPU while BUDGET_CHURN runners a namespace turn idle and busy again, as
// jobs end and start. It asserts only that each design holds a busy pod
// and frees an idle one; the figures are reported, for
// docs/performance/logs (2026-12-07-budgets.md).
func TestBudgetsCost(t *testing.T) {
	n := apitest.EnvInt("BUDGET_RUNNERS", 200)
	churn := min(n, apitest.EnvInt("BUDGET_CHURN", 100))
	evictions := apitest.EnvInt("BUDGET_EVICTIONS", 100)
	ctx, cancel := context.WithTimeout(context.Background(), scaled(20*time.Minute, 3*n, 50*time.Millisecond))
	defer cancel()
	dir := t.TempDir()
	artifacts, err := apitest.Artifacts()
	if err != nil {
		t.Fatal(err)
	}
	cluster, _, err := startCluster(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cluster.Stop() }()
	cp, err := findControlPlane(cluster)
	if err != nil {
		t.Fatal(err)
	}
	kw, err := apitest.StartKwok(cluster, dir, filepath.Join(artifacts, "budgets-kwok.log"), nodeLabel+"=kwok")
	if err != nil {
		t.Fatal(err)
	}
	defer kw.Stop(ctx)
	kcm, err := startDisruption(cluster, dir, filepath.Join(artifacts, "budgets-kcm.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer kcm.Stop(ctx)

	b := &budgets{admin: cluster.Clientset, n: n, workers: 32}
	if err := b.setup(ctx, t); err != nil {
		t.Fatal(err)
	}
	idle := time.Now()
	kcmIdle, _ := readProc(kcm.Pid())
	time.Sleep(10 * time.Second)
	kcmIdleEnd, _ := readProc(kcm.Pid())
	rep := &budgetReport{n: n, churn: churn, setup: b.setupTook,
		refused: map[string]*phase{}, allowed: map[string]*phase{}, churned: map[string]*phase{},
		kcmIdle: (kcmIdleEnd.CPU - kcmIdle.CPU) / time.Since(idle).Seconds()}

	// Evictions: each design's refused (a busy pod) and allowed (an idle
	// pod, which goes) in turn, each phase timed for the API server's CPU.
	for _, design := range []string{perPod, shared, unguarded} {
		if design != unguarded {
			rep.refused[design] = b.evictPhase(ctx, t, cp, design, evictions, true)
		}
		rep.allowed[design] = b.evictPhase(ctx, t, cp, design, min(evictions, b.idleLeft(design)), false)
	}
	// Churn: runners turn idle then busy again, design by design, with
	// the disruption controller's work read from its metrics.
	for _, design := range []string{perPod, shared} {
		rep.churned[design] = b.churnPhase(ctx, t, cp, kcm, design, churn)
	}
	text := rep.String()
	fmt.Print(text)
	if err := os.WriteFile(filepath.Join(artifacts, fmt.Sprintf("budgets-%d.txt", n)), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// budgets is the run's pods: per design, n busy and idle ones.
type budgets struct {
	admin     *kubernetes.Clientset
	n         int
	workers   int
	busy      map[string][]*corev1.Pod
	idle      map[string][]*corev1.Pod
	setupTook map[string]time.Duration
}

// hold makes pod busy in its design: per pod, its label and its budget
// (the marker's two writes); shared, its label.
func (b *budgets) hold(ctx context.Context, pod *corev1.Pod) error {
	switch pod.Namespace {
	case perPod:
		if err := b.label(ctx, pod, runnerpod.BudgetLabel, ptr.To(string(pod.UID))); err != nil {
			return err
		}
		_, err := b.admin.PolicyV1().PodDisruptionBudgets(perPod).Create(ctx, oldBudget(pod), metav1.CreateOptions{})
		return err
	case shared:
		return b.label(ctx, pod, runnerpod.BudgetLabel, ptr.To(recorder.BudgetHeld))
	}
	return nil
}

// free makes pod idle: hold undone, in the marker's order (the budget
// first, then its label).
func (b *budgets) free(ctx context.Context, pod *corev1.Pod) error {
	switch pod.Namespace {
	case perPod:
		err := b.admin.PolicyV1().PodDisruptionBudgets(perPod).Delete(ctx, oldBudget(pod).Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return b.label(ctx, pod, runnerpod.BudgetLabel, nil)
	case shared:
		return b.label(ctx, pod, runnerpod.BudgetLabel, nil)
	}
	return nil
}

// label sets (or, value nil, removes) one label of pod with a merge patch.
func (b *budgets) label(ctx context.Context, pod *corev1.Pod, key string, value *string) error {
	v := "null"
	if value != nil {
		v = fmt.Sprintf("%q", *value)
	}
	body := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, key, v)
	_, err := b.admin.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
	return err
}

// String is the report's table.
func (r *budgetReport) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "\nBudgets at %d busy runners a namespace (kwok's pods; the real kube-apiserver, etcd and disruption controller)\n", r.n)
	fmt.Fprintf(&s, "%-44s %18s %18s %18s\n", "", perPod, shared, unguarded)
	row := func(name string, f func(design string) string) {
		fmt.Fprintf(&s, "%-44s %18s %18s %18s\n", name, f(perPod), f(shared), f(unguarded))
	}
	row("setup (pods, labels, budgets)", func(d string) string { return r.setup[d].Round(time.Second).String() })
	row("refused eviction p50 / p99", func(d string) string { return r.refused[d].latency() })
	row("  API server CPU per refused eviction", func(d string) string { return r.refused[d].cpuPer() })
	row("  etcd CPU per refused eviction", func(d string) string { return r.refused[d].etcdPer() })
	row("allowed eviction (idle pod) p50 / p99", func(d string) string { return r.allowed[d].latency() })
	row("  API server CPU per allowed eviction", func(d string) string { return r.allowed[d].cpuPer() })
	row(fmt.Sprintf("churn: %d runners idle and busy again", r.churn), func(d string) string { return r.churned[d].wallOf() })
	row("  API requests (all clients) per turn", func(d string) string { return r.churned[d].writesPer() })
	row("  disruption controller syncs per turn", func(d string) string { return r.churned[d].syncsPer() })
	row("  disruption controller work (s)", func(d string) string { return r.churned[d].workOf() })
	row("  kube-controller-manager CPU (s)", func(d string) string { return r.churned[d].kcmOf() })
	row("  API server CPU (s)", func(d string) string { return r.churned[d].apiOf() })
	fmt.Fprintf(&s, "kube-controller-manager idle, every pod and budget in place: %.1f ms CPU a second\n", 1000*r.kcmIdle)
	return s.String()
}
