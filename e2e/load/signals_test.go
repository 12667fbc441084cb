//go:build load

package load

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/e2e/internal/registration"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// The namespaces of the policy's measurement: neither is selected by a
// webhook, so what differs between them is the policy alone.
const (
	nsNoPolicy  = "load-nopolicy"
	nsPolicy    = "load-policy"
	policyLabel = "runnerguard.io/load-policy"
)

// TestWhatThePolicyAddsToPodCreateAndUpdate times runner pod CREATEs and
// metadata UPDATEs (a merge patch of an annotation the guard does not read,
// so every rule of the policy is evaluated and allows) with and without
// the chart's ValidatingAdmissionPolicy, interleaved round by round.
func TestWhatThePolicyAddsToPodCreateAndUpdate(t *testing.T) {
	ctx := context.Background()
	o := registration.Options{Name: "runnerguard-signals", NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{policyLabel: "true"}}}
	objs, err := registration.Render(cfg, o)
	require.NoError(t, err)
	require.NoError(t, cluster.Client.Create(ctx, objs.Policy))
	require.NoError(t, cluster.Client.Create(ctx, objs.Binding))
	for name, labels := range map[string]map[string]string{nsNoPolicy: nil, nsPolicy: {policyLabel: "true"}} {
		require.NoError(t, cluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}))
	}
	// A binding takes effect a moment after it is created: wait until a
	// forged creator is refused.
	forged := newRunner(nsPolicy, "forged")
	forged.Annotations = map[string]string{runnerpod.CreatedBy: "somebody-else"}
	require.Eventually(t, func() bool {
		_, err := fast.CoreV1().Pods(nsPolicy).Create(ctx, forged, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+o.Name+"'")
	}, 15*time.Second, 100*time.Millisecond, "the policy is enforced")

	rounds := apitest.EnvInt("LOAD_ROUNDS", 300)
	warmup := min(maxWarmup, rounds)
	report.Rounds = rounds
	setups := []string{nsNoPolicy, nsPolicy}
	creates, updates := map[string][]time.Duration{}, map[string][]time.Duration{}
	pods := fast.CoreV1()
	for r := -warmup; r < rounds; r++ {
		for i := range setups {
			ns := setups[(r+warmup+i)%len(setups)]
			d, err := timed(func() error {
				_, err := pods.Pods(ns).Create(ctx, newRunner(ns, fmt.Sprintf("s%d", r+warmup)), metav1.CreateOptions{})
				return err
			})
			require.NoError(t, err)
			if r >= 0 {
				creates[ns] = append(creates[ns], d)
			}
		}
	}
	for r := -warmup; r < rounds; r++ {
		for i := range setups {
			ns := setups[(r+warmup+i)%len(setups)]
			patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"example.com/round":"%d"}}}`, r)
			d, err := timed(func() error {
				_, err := pods.Pods(ns).Patch(ctx, fmt.Sprintf("s%d", r+warmup), types.MergePatchType, patch, metav1.PatchOptions{})
				return err
			})
			require.NoError(t, err)
			if r >= 0 {
				updates[ns] = append(updates[ns], d)
			}
		}
	}
	for _, op := range []struct {
		name  string
		times map[string][]time.Duration
	}{{"runner pod CREATE", creates}, {"runner pod UPDATE (metadata)", updates}} {
		report.AddLatency(op.name, "no policy", op.times[nsNoPolicy], nil, "")
		report.AddLatency(op.name, "runnerguard ValidatingAdmissionPolicy", op.times[nsPolicy], nil, "no policy")
	}
	for _, ns := range setups {
		removeAll(t, ns)
	}
}
