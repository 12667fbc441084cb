package guard

import (
	"net/http"

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
		if w := warning(d); w != "" {
			r = r.WithWarnings(w)
		}
		return r
	}
	if op == Eviction {
		return refuse(http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, d.Message)
	}
	return refuse(http.StatusForbidden, metav1.StatusReasonForbidden, d.Message)
}

func refuse(code int32, reason metav1.StatusReason, msg string) admission.Response {
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{
		Allowed: false,
		Result:  &metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg},
	}}
}

// retryLater refuses for now with 429, so the caller retries.
func retryLater(msg string) admission.Response {
	return refuse(http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "runnerguard: "+msg+"; retry")
}
