package responder

import (
	"encoding/json"
	"fmt"

	"gomodules.xyz/jsonpatch/v2"
)

// podSpec is what Naming reads of a pod being created, from the raw pod:
// as the API server sent it, whatever this build's Pod type knows of the
// alpha field.
type podSpec struct {
	Spec struct {
		EvictionResponders []struct {
			Name string `json:"name"`
		} `json:"evictionResponders"`
		SchedulingGroup json.RawMessage `json:"schedulingGroup"`
	} `json:"spec"`
}

// entry is runnerguard's entry in a pod's spec.evictionResponders.
func entry() map[string]any { return map[string]any{"name": Name, "priority": Priority} }

// Naming is the JSON patch that names runnerguard among the responders of
// the pod raw (a CREATE's pod, after the injector's own patch), and a
// warning when it cannot be named. The field is set only at creation,
// so the injector is the one place to set it. A pod that names runnerguard
// already keeps its entry (reinvocation, or its author chose the
// priority); one with the most responders the API allows, or in a
// PodGroup (which the API leaves out of the model), is left as it is.
func Naming(raw []byte) ([]jsonpatch.Operation, string) {
	var p podSpec
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Sprintf("runnerguard: not named as the pod's eviction responder: reading its spec: %v", err)
	}
	rs := p.Spec.EvictionResponders
	for _, r := range rs {
		if r.Name == Name {
			return nil, ""
		}
	}
	switch {
	case len(p.Spec.SchedulingGroup) > 0 && string(p.Spec.SchedulingGroup) != "null":
		return nil, ""
	case len(rs) >= MaxResponders:
		return nil, fmt.Sprintf("runnerguard: not named as the pod's eviction responder: it names %d already, the most the API allows; an EvictionRequest for it does not wait for its job", len(rs))
	case len(rs) == 0:
		return []jsonpatch.Operation{{Operation: "add", Path: "/spec/evictionResponders", Value: []any{entry()}}}, ""
	}
	return []jsonpatch.Operation{{Operation: "add", Path: "/spec/evictionResponders/-", Value: entry()}}, ""
}
