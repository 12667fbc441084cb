//go:build scale

package scale

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
)

// baseSuffix names the baseline's runner namespaces: the same simulation
// without runnerguard, run first in the same cluster.
const baseSuffix = "-base"

// fleet is what one simulation runs against; replicas are nil for the
// baseline.
type fleet struct {
	cfg                     *rest.Config
	admin                   *kubernetes.Clientset
	crAdmin                 client.Client
	obs                     *observer
	cp                      controlPlane
	auditLog                string
	runners, nodes, workers int
	replicas                [2]*apitest.Server
	// kills: the kill paths, struck in the guarded run only.
	kills *kills
	// artifacts is where the heap profiles go.
	artifacts string
	// rep: the reports' destinations, in the guarded run only.
	rep *reporting
}

func nodeName(i int) string { return fmt.Sprintf("kwok-%04d", i) }

// alive drops the runners the baseline lost.
func alive(rs []*runner) []*runner {
	out := make([]*runner, 0, len(rs))
	for _, r := range rs {
		if !r.lost {
			out = append(out, r)
		}
	}
	return out
}

// notRunning counts the pods matching selector in namespaces ("" for
// all) that kwok has not run, or -1 on an error: metadata only, from the
// watch cache filtered there, so a wait on thousands of pods lists only
// those left, not the whole fleet, and not their specs.
func notRunning(ctx context.Context, meta metadata.Interface, selector string, namespaces ...string) int {
	n := 0
	for _, ns := range namespaces {
		list, err := meta.Resource(corev1.SchemeGroupVersion.WithResource("pods")).Namespace(ns).List(ctx,
			metav1.ListOptions{LabelSelector: selector, FieldSelector: "status.phase!=Running", ResourceVersion: "0"})
		if err != nil {
			return -1
		}
		n += len(list.Items)
	}
	return n
}

// clearNamespaces force-deletes every pod of namespaces (in parallel:
// the API server's DeleteCollection deletes one at a time), so
// runnerguard starts without the baseline's dead runners to record.
func clearNamespaces(ctx context.Context, c *kubernetes.Clientset, workers int, namespaces ...string) error {
	var pods []corev1.Pod
	for _, ns := range namespaces {
		list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		pods = append(pods, list.Items...)
	}
	if errs := parallel(pods, workers, func(p corev1.Pod) error {
		err := c.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}); len(errs) > 0 {
		return fmt.Errorf("%d deletes failed, first: %w", len(errs), errs[0])
	}
	return nil
}

// sorted returns d in order, for pct.
func sorted(d []time.Duration) []time.Duration {
	out := append([]time.Duration(nil), d...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// compare is the report's side by side of the baseline (r.base) and the
// guarded run r: the same simulation, the same cluster, without and with
// runnerguard.
func (r *run) compare() string {
	b := r.base
	if b == nil {
		return ""
	}
	var sb strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&sb, format+"\n", a...) }
	o := r.others
	p("")
	p("== The cluster: %d other pods (%d of them non-runner pods in the runner namespaces), created in %s, all Running after %s (kwok CPU %.1f s, kube-apiserver %.1f s, etcd %.1f s); pods in the cluster at the guarded run's peak: %d ==",
		o.pods, o.inRunnerNS, o.created, o.running, o.cost.kwokCPU, o.cost.apiCPU, o.cost.etcdCPU, r.cp[1].pods)
	p("== Without runnerguard (baseline, namespaces *%s, run first) and with it, side by side ==", baseSuffix)
	p("%-46s %22s %22s %8s", "", "baseline", "runnerguard", "ratio")
	row := func(what string, bv, gv float64, unit string, prec int) {
		p("%-46s %22s %22s %8s", what, formatFloat(bv, prec)+unit, formatFloat(gv, prec)+unit, ratio(gv, bv))
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	row("create burst", b.burst.Seconds(), r.burst.Seconds(), " s", 2)
	for _, l := range []struct {
		what   string
		bd, gd []time.Duration
	}{{"pod CREATE", b.createRTT, r.createRTT}, {"reaper's DELETE of a busy runner", b.deleteRTT, r.deleteRTT},
		{"drain's eviction of a busy runner", b.evictRTT, r.evictRTT},
		// The baseline's drain evicts with no budget in the namespace;
		// the guarded run's allowed evictions (after the override) with
		// the namespace's budget in place.
		{"allowed eviction (no budget / budget)", b.evictRTT, r.overrideRTT},
		{"GitLab job-end DELETE", b.allowedRTT, r.allowedRTT}} {
		bs, gs := sorted(l.bd), sorted(l.gd)
		row("round trip p50, "+l.what, ms(pct(bs, .5)), ms(pct(gs, .5)), " ms", 0)
		row("round trip p99, "+l.what, ms(pct(bs, .99)), ms(pct(gs, .99)), " ms", 0)
	}
	jobs := float64(r.runners)
	for i, phase := range []string{"burst (create to all Running)", "kills and ends (to the end)"} {
		bp, gp := phaseOf(b.cp[i], b.cp[i+1]), phaseOf(r.cp[i], r.cp[i+1])
		p("phase: %s, wall %s / %s", phase, bp.wall, gp.wall)
		row("  kube-apiserver CPU", bp.apiCPU, gp.apiCPU, " s", 2)
		row("  etcd CPU", bp.etcdCPU, gp.etcdCPU, " s", 2)
		row("  kwok CPU", bp.kwokCPU, gp.kwokCPU, " s", 2)
		row("  kube-controller-manager (disruption) CPU", bp.dcmCPU, gp.dcmCPU, " s", 2)
		row("  disruption controller queue adds", bp.dAdds, gp.dAdds, "", 0)
		row("  disruption controller work", bp.dWork, gp.dWork, " s", 2)
		row("  kube-apiserver RSS at the end", mib(bp.apiRSS), mib(gp.apiRSS), " MiB", 0)
		row("  etcd RSS at the end", mib(bp.etcdRSS), mib(gp.etcdRSS), " MiB", 0)
		row("  API requests (all clients) per job", float64(bp.requests)/jobs, float64(gp.requests)/jobs, "", 2)
	}
	bc, gc := b.chaos, r.chaos
	p("busy runners lost: baseline %d (reaper %d of %d deleted, drain %d of %d evicted), runnerguard %d",
		bc.busyLost, bc.reaperTried-bc.reaperRefused, bc.reaperTried, bc.drainTried-bc.drainRefused429, bc.drainTried, gc.busyLost)
	return sb.String()
}
