package guard

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// countedSoFar sums every series of the guard's decisions and
// owner-not-taken counters.
func countedSoFar(t *testing.T) (decided, notTaken float64) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(decisions))
	require.NoError(t, reg.Register(ownersNotTaken))
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "runnerguard_guard_decisions_total":
				decided += m.GetCounter().GetValue()
			case "runnerguard_guard_owner_not_taken_total":
				notTaken += m.GetCounter().GetValue()
			}
		}
	}
	return decided, notTaken
}

func TestOnlyAReviewThatWasSentAndCarriedOutIsCounted(t *testing.T) {
	const manager = "system:serviceaccount:ci:gitlab-runner"
	busy := func() *corev1.Pod { return podtest.Runner("ci", "busy").Running("runner").Obj() }
	build := func() *corev1.Pod {
		return podtest.GitLab("ci", "build").Running("build").Annotate(runnerpod.CreatedBy, manager).Obj()
	}
	dryRun := &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
	cases := []struct {
		name string
		// there is the pod as the API server holds it; nil: none.
		there *corev1.Pod
		req   func(t *testing.T) admission.Request
		// counted: the decision counts; notTaken: so does a job owner not
		// taken. allowed: the answer, the decision's whether counted or not.
		counted, notTaken, allowed bool
	}{
		{name: "a refused delete of a pod that is there is counted", there: busy(), counted: true,
			req: func(t *testing.T) admission.Request { return deleteReq(t, busy(), "reaper", false, nil) }},
		{name: "a refused eviction of a pod that is there is counted", there: busy(), counted: true,
			req: func(t *testing.T) admission.Request { return evictionReq(t, "ci", "busy", "reaper", nil) }},
		{name: "a refused delete of the fleet's manager is counted as an owner not taken", there: build(), counted: true, notTaken: true,
			req: func(t *testing.T) admission.Request { return deleteReq(t, build(), manager, false, nil) }},
		{name: "a forged delete of a pod that does not exist is not counted",
			req: func(t *testing.T) admission.Request { return deleteReq(t, busy(), "reaper", false, nil) }},
		{name: "a forged delete of a manager's pod that does not exist counts no owner not taken",
			req: func(t *testing.T) admission.Request { return deleteReq(t, build(), manager, false, nil) }},
		{name: "a forged delete naming another UID of a pod that is there is not counted", there: busy(),
			req: func(t *testing.T) admission.Request {
				forged := busy()
				forged.UID = types.UID("forged")
				return deleteReq(t, forged, "reaper", false, nil)
			}},
		{name: "a forged allowed delete of a pod that does not exist is not counted", allowed: true,
			req: func(t *testing.T) admission.Request {
				return deleteReq(t, podtest.Runner("ci", "busy").Running("runner").Annotate(runnerpod.AllowDelete, "forged").Obj(), "reaper", false, nil)
			}},
		{name: "a dry-run delete is not counted", there: busy(),
			req: func(t *testing.T) admission.Request { return deleteReq(t, busy(), "reaper", true, nil) }},
		{name: "a dry-run delete of the fleet's manager counts no owner not taken", there: build(),
			req: func(t *testing.T) admission.Request { return deleteReq(t, build(), manager, true, nil) }},
		{name: "a dry-run eviction, its dry run only in its options, is not counted", there: busy(),
			req: func(t *testing.T) admission.Request { return evictionReq(t, "ci", "busy", "karpenter", dryRun) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h *Handler
			if tc.there != nil {
				h, _ = newTestHandler(tc.there)
			} else {
				h, _ = newTestHandler()
			}
			decided, notTaken := countedSoFar(t)
			resp := serve(t, h, tc.req(t))
			h.Wait()
			require.Equal(t, tc.allowed, resp.Allowed, resp.Result.Message)
			gotDecided, gotNotTaken := countedSoFar(t)
			assert.Equal(t, boolCount(tc.counted), gotDecided-decided, "decisions counted")
			assert.Equal(t, boolCount(tc.notTaken), gotNotTaken-notTaken, "owners not taken counted")
		})
	}
}

func boolCount(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
