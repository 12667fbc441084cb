package guard

import (
	"github.com/runnerguard/runnerguard/internal/runnerpod"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// response turns a decision into the review's answer. A refused eviction
// answers 429 TooManyRequests: kubectl drain, Karpenter and the cluster
// autoscaler retry on 429 until the job ends, and give up on anything else
// (kubectl pkg/drain evictPods). A refused DELETE answers 403: a person or a
// reaper must decide, not retry. The API server keeps the code the webhook
// sets (apiserver webhook errors ToStatusErr).
func response(op Operation, d Decision) admission.Response {
	if d.Allowed {
		r := admission.Allowed(d.Message)
		switch d.Rule {
		case runnerpod.RuleOverride:
			r = r.WithWarnings("runnerguard: deleting a busy runner pod (" + d.Message + ")")
		case runnerpod.RuleProtectionExpired:
			r = r.WithWarnings("runnerguard: " + d.Message)
		case runnerpod.RuleNodeDrain:
			r = r.WithWarnings("runnerguard: deleting a busy runner pod (" + d.Message + ")")
		case runnerpod.RuleBusy:
			r = r.WithWarnings(d.Message)
		}
		return r
	}
	if op == Eviction {
		return refuse(http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, d.Message)
	}
	return refuse(http.StatusForbidden, metav1.StatusReasonForbidden, d.Message)
}

// refusalPlan is what a refusal's Event adds for an operator planning the
// drain: since when the runner has run, the job it runs where the fleet
// names one, and when its protection ends; all of it from what Decide read.
func refusalPlan(f Facts, d Decision) string {
	since, ends := busySince(f, d)
	var parts []string
	if since != "" {
		parts = append(parts, "running since "+since)
	}
	if j := jobText(d.Job); j != "" {
		parts = append(parts, j)
	}
	if ends != "" {
		parts = append(parts, "protection ends at "+ends)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

func refuse(code int32, reason metav1.StatusReason, msg string) admission.Response {
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{
		Allowed: false,
		Result:  &metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg},
	}}
}

func decisionLabel(d Decision) string {
	if d.Warned {
		return "warn"
	}
	if d.Allowed {
		return "allow"
	}
	return "deny"
}

// retryLater refuses for now with 429, so the caller retries.
func retryLater(msg string) admission.Response {
	return refuse(http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "runnerguard: "+msg+"; retry")
}
