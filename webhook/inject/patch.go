package inject

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// patchResponse answers with the JSON patch from the request's raw pod to
// the mutated one; before and after are the decoded pod as this build
// encodes it, before and after Mutate. The diff base is the raw request,
// never a re-marshalled copy (kubebuilder#510), and libraries compute
// every patch.
//
// Fields of the raw pod that this build's Pod type does not know (an API
// server newer than the webhook) are missing from the marshalled pod, so a
// plain diff would remove them. controller-runtime's Defaulter drops such
// removals afterwards, but the diff of arrays is by index: with the sidecar
// put first in initContainers every init container shifts one place, and an
// unknown field of ARC's dind sidecar at index 0 would be kept at index 0,
// on our sidecar. So the typed change is first carried over to the raw pod
// as a strategic merge patch, which merges containers, volumes, env and
// mounts by name and leaves unknown fields where they were, and the JSON
// patch is the diff from raw to that. Where the merge does not reproduce
// the typed result exactly (duplicate env names, which the merge keys
// cannot tell apart), controller-runtime's way is taken instead.
func patchResponse(raw, before, after []byte, mutated *corev1.Pod) admission.Response {
	// The API server encodes the pod with encoding/json from the same Go
	// types. When this build's encoding gives back the raw bytes exactly,
	// the raw pod holds nothing the Pod type does not know, and the plain
	// diff is exact: the merge, two thirds of a review's cost, is skipped.
	if bytes.Equal(raw, before) {
		return admission.PatchResponseFromRaw(raw, after)
	}
	if merged, err := mergeIntoRaw(raw, before, after); err == nil && decodesTo(merged, mutated) {
		return admission.PatchResponseFromRaw(raw, merged)
	}
	return dropSchemeRemovals(admission.PatchResponseFromRaw(raw, after), raw, before)
}

// mergeIntoRaw applies the change from before to after onto raw.
func mergeIntoRaw(raw, before, after []byte) ([]byte, error) {
	change, err := strategicpatch.CreateTwoWayMergePatch(before, after, &corev1.Pod{})
	if err != nil {
		return nil, err
	}
	return strategicpatch.StrategicMergePatch(raw, change, &corev1.Pod{})
}

// decodesTo reports whether data decodes to exactly want.
func decodesTo(data []byte, want *corev1.Pod) bool {
	var got corev1.Pod
	return json.Unmarshal(data, &got) == nil && reflect.DeepEqual(&got, want)
}

// dropSchemeRemovals removes from r the "remove" operations that only
// reflect fields the Pod type does not know, as controller-runtime's
// Defaulter does (admission/defaulter_custom.go).
func dropSchemeRemovals(r admission.Response, raw, before []byte) admission.Response {
	if !r.Allowed || !slices.ContainsFunc(r.Patches, isRemove) {
		return r
	}
	scheme, err := jsonpatch.CreatePatch(raw, before)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("diffing the pod: %w", err))
	}
	r.Patches = slices.DeleteFunc(r.Patches, func(op jsonpatch.Operation) bool {
		return isRemove(op) && slices.ContainsFunc(scheme, func(s jsonpatch.Operation) bool { return isRemove(s) && s.Path == op.Path })
	})
	if len(r.Patches) == 0 {
		r.PatchType = nil
	}
	return r
}

func isRemove(op jsonpatch.Operation) bool { return op.Operation == "remove" }
