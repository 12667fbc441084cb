//go:build scale

package scale

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/recorder"
)

// disruption is kube-controller-manager running only the disruption
// controller, its metrics served on a port of its own.
type disruption struct {
	*apitest.Process
	metricsURL string
}

// startDisruption runs the real kube-controller-manager with the
// disruption controller alone, its metrics readable without credentials
// on loopback.
func startDisruption(c *apitest.Cluster, dir, logPath string) (*disruption, error) {
	kc, err := c.AdminKubeconfig(dir, "kube-controller-manager")
	if err != nil {
		return nil, err
	}
	port, err := apitest.FreePort()
	if err != nil {
		return nil, err
	}
	p, err := apitest.StartProcess("kube-controller-manager", filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-controller-manager"), logPath, nil,
		"--kubeconfig="+kc, "--controllers=disruption", "--leader-elect=false",
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
		"--authentication-kubeconfig="+kc, "--authorization-always-allow-paths=/healthz,/metrics")
	if err != nil {
		return nil, err
	}
	return &disruption{Process: p, metricsURL: fmt.Sprintf("https://127.0.0.1:%d/metrics", port)}, nil
}

// queue reads the disruption controller's work queue: items added, their
// work in seconds, and its depth now.
func (d *disruption) queue(ctx context.Context) (adds, work, depth float64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.metricsURL, nil)
	if err != nil {
		return 0, 0, 0, err
	}
	// kube-controller-manager's self-signed serving certificate.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 10 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return 0, 0, 0, fmt.Errorf("%s: %s", resp.Status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, 0, 0, err
	}
	for _, m := range fams["workqueue_adds_total"].GetMetric() {
		if label(m.GetLabel(), "name") == "disruption" {
			adds = m.GetCounter().GetValue()
		}
	}
	for _, m := range fams["workqueue_work_duration_seconds"].GetMetric() {
		if label(m.GetLabel(), "name") == "disruption" {
			work = m.GetHistogram().GetSampleSum()
		}
	}
	for _, m := range fams["workqueue_depth"].GetMetric() {
		if label(m.GetLabel(), "name") == "disruption" {
			depth = m.GetGauge().GetValue()
		}
	}
	return adds, work, depth, nil
}

// label is the value of the label called name among pairs.
func label[P interface {
	GetName() string
	GetValue() string
}](pairs []P, name string) string {
	for _, p := range pairs {
		if p.GetName() == name {
			return p.GetValue()
		}
	}
	return ""
}

// setup creates the designs' namespaces, kwok's nodes and every pod, waits
// until they run, then makes each design's busy pods busy (timed), and
// waits until the disruption controller has weighed every budget.
func (b *budgets) setup(ctx context.Context, t *testing.T) error {
	designs := []string{perPod, shared, unguarded}
	nodes := max(1, b.n/100)
	for i := range nodes {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName(i), Labels: map[string]string{nodeLabel: "kwok"}}}
		if _, err := b.admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	b.busy, b.idle, b.setupTook = map[string][]*corev1.Pod{}, map[string][]*corev1.Pod{}, map[string]time.Duration{}
	idle := apitest.EnvInt("BUDGET_EVICTIONS", 100)
	type want struct {
		ns, name string
		node     int
		busy     bool
	}
	var pods []want
	for _, ns := range designs {
		if _, err := b.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		for i := range b.n + idle {
			pods = append(pods, want{ns: ns, name: fmt.Sprintf("runner-%05d", i), node: i % nodes, busy: i < b.n})
		}
	}
	results := make(chan *corev1.Pod, len(pods))
	if errs := parallel(pods, b.workers, func(w want) error {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: w.ns, Labels: map[string]string{fleetLabel: "1"}},
			Spec: corev1.PodSpec{NodeName: nodeName(w.node), RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To(int64(0)),
				Containers: []corev1.Container{{Name: "runner", Image: "example.com/runner:1"}}},
		}
		if w.busy {
			pod.Annotations = map[string]string{"sim.runnerguard.io/busy-at-start": "true"}
		}
		made, err := b.admin.CoreV1().Pods(w.ns).Create(ctx, pod, metav1.CreateOptions{})
		if err == nil {
			results <- made
		}
		return err
	}); len(errs) > 0 {
		return errors.Join(errs...)
	}
	close(results)
	for p := range results {
		if _, busy := p.Annotations["sim.runnerguard.io/busy-at-start"]; busy {
			b.busy[p.Namespace] = append(b.busy[p.Namespace], p)
		} else {
			b.idle[p.Namespace] = append(b.idle[p.Namespace], p)
		}
	}
	apitest.Until(ctx, t, scaled(5*time.Minute, len(pods), 50*time.Millisecond), "kwok to start every pod", func() bool { return runningPods(ctx, b.admin) == len(pods) })

	for _, ns := range designs {
		start := time.Now()
		if ns == shared {
			if _, err := b.admin.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, recorder.Budget(ns), metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		if errs := parallel(b.busy[ns], b.workers, func(p *corev1.Pod) error { return b.hold(ctx, p) }); len(errs) > 0 {
			return errors.Join(errs...)
		}
		b.setupTook[ns] = time.Since(start)
	}
	b.settled(ctx, t)
	return nil
}

// settled waits until the disruption controller has weighed every budget
// as it now stands.
func (b *budgets) settled(ctx context.Context, t *testing.T) {
	t.Helper()
	apitest.Until(ctx, t, scaled(5*time.Minute, b.n, 20*time.Millisecond), "the disruption controller to weigh every budget", func() bool {
		for _, ns := range []string{perPod, shared} {
			list, err := b.admin.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false
			}
			for _, pdb := range list.Items {
				if pdb.Status.ObservedGeneration != pdb.Generation || pdb.Status.DisruptionsAllowed != 0 {
					return false
				}
			}
		}
		return true
	})
}

// idleLeft is how many idle pods of design are left to evict.
func (b *budgets) idleLeft(design string) int { return len(b.idle[design]) }

// phase is one measured phase: round trips, and the control plane's CPU.
type phase struct {
	lat              []time.Duration
	apiCPU, etcdCPU  float64
	wall             time.Duration
	requests         int64
	syncs, work, kcm float64
	turns            int
}

// evictPhase evicts count pods of design one after another, busy ones
// (each must be refused, 429) or idle ones (each must go).
func (b *budgets) evictPhase(ctx context.Context, t *testing.T, cp controlPlane, design string, count int, busy bool) *phase {
	t.Helper()
	ph := &phase{}
	api0, _ := readProc(cp.apiserver)
	etcd0, _ := readProc(cp.etcd)
	for i := range count {
		var pod *corev1.Pod
		if busy {
			pod = b.busy[design][i%len(b.busy[design])]
		} else {
			pod, b.idle[design] = b.idle[design][0], b.idle[design][1:]
		}
		start := time.Now()
		err := b.admin.PolicyV1().Evictions(design).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: design}})
		ph.lat = append(ph.lat, time.Since(start))
		switch {
		case busy && !apierrors.IsTooManyRequests(err):
			t.Fatalf("%s: the eviction of busy %s was answered %v, not refused", design, pod.Name, err)
		case !busy && err != nil:
			t.Fatalf("%s: the eviction of idle %s was refused: %v", design, pod.Name, err)
		}
	}
	api1, _ := readProc(cp.apiserver)
	etcd1, _ := readProc(cp.etcd)
	ph.apiCPU, ph.etcdCPU, ph.turns = api1.CPU-api0.CPU, etcd1.CPU-etcd0.CPU, count
	ph.lat = sorted(ph.lat)
	return ph
}

// churnPhase turns k busy runners of design idle and busy again, as jobs
// end and the runners take new ones, and reads what it cost once the
// disruption controller has settled.
func (b *budgets) churnPhase(ctx context.Context, t *testing.T, cp controlPlane, kcm *disruption, design string, k int) *phase {
	t.Helper()
	ph := &phase{turns: k}
	adds0, work0, _, err := kcm.queue(ctx)
	if err != nil {
		t.Fatalf("reading the disruption controller's metrics: %v", err)
	}
	req0, _ := apiRequests(ctx, cp.admin)
	api0, _ := readProc(cp.apiserver)
	kcm0, _ := readProc(kcm.Pid())
	start := time.Now()
	pods := b.busy[design][:k]
	for _, step := range []func(context.Context, *corev1.Pod) error{b.free, b.hold} {
		if errs := parallel(pods, b.workers, func(p *corev1.Pod) error { return step(ctx, p) }); len(errs) > 0 {
			t.Fatal(errors.Join(errs...))
		}
	}
	ph.wall = time.Since(start)
	b.settled(ctx, t)
	// Quiet: the queue empty at two reads a second apart.
	apitest.Until(ctx, t, 5*time.Minute, "the disruption controller's queue to empty", func() bool {
		_, _, d1, err1 := kcm.queue(ctx)
		time.Sleep(time.Second)
		_, _, d2, err2 := kcm.queue(ctx)
		return err1 == nil && err2 == nil && d1 == 0 && d2 == 0
	})
	adds1, work1, _, _ := kcm.queue(ctx)
	req1, _ := apiRequests(ctx, cp.admin)
	api1, _ := readProc(cp.apiserver)
	kcm1, _ := readProc(kcm.Pid())
	ph.syncs, ph.work, ph.kcm, ph.apiCPU = adds1-adds0, work1-work0, kcm1.CPU-kcm0.CPU, api1.CPU-api0.CPU
	ph.requests = req1 - req0
	// Still held: a busy pod's eviction is refused after the churn.
	if err := b.admin.PolicyV1().Evictions(design).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pods[0].Name, Namespace: design}}); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("%s: after the churn, the eviction of busy %s was answered %v, not refused", design, pods[0].Name, err)
	}
	return ph
}

// budgetReport is the run's figures by design.
type budgetReport struct {
	n, churn                  int
	setup                     map[string]time.Duration
	refused, allowed, churned map[string]*phase
	kcmIdle                   float64
}

func (p *phase) latency() string {
	if p == nil || len(p.lat) == 0 {
		return "-"
	}
	return fmt.Sprintf("%v / %v", pct(p.lat, 0.5), pct(p.lat, 0.99))
}

func (p *phase) per(v float64) string {
	if p == nil || p.turns == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f ms", 1000*v/float64(p.turns))
}

func (p *phase) cpuPer() string {
	if p == nil {
		return "-"
	}
	return p.per(p.apiCPU)
}

func (p *phase) etcdPer() string {
	if p == nil {
		return "-"
	}
	return p.per(p.etcdCPU)
}

func (p *phase) wallOf() string {
	if p == nil {
		return "-"
	}
	return p.wall.Round(time.Millisecond).String()
}

func (p *phase) writesPer() string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(p.requests)/float64(p.turns))
}

func (p *phase) syncsPer() string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", p.syncs/float64(p.turns))
}

func (p *phase) workOf() string { return p.secs(func() float64 { return p.work }) }
func (p *phase) kcmOf() string  { return p.secs(func() float64 { return p.kcm }) }
func (p *phase) apiOf() string  { return p.secs(func() float64 { return p.apiCPU }) }

func (p *phase) secs(f func() float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", f())
}
