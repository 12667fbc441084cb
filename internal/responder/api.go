package responder

import (
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
)

// Name is runnerguard's name as a responder, on a runner pod's
// spec.evictionResponders and in an Eviction's status. The controller
// also labels each Eviction with it, so the leader watches only its own.
const Name = "runnerguard.io/guard"

// Priority is runnerguard's place among a pod's responders. The API asks
// a pod's managing controller (the fleet's: ARC, GitLab's runner) to take
// a priority that leaves room above and below it; runnerguard takes one
// just below it, so a fleet that learns to answer for its own runners goes
// first, and runnerguard answers after it, or alone. The default
// evictor's, far lower, comes after runnerguard: it evicts only once
// runnerguard has let the runner go.
const Priority int32 = 9000

// MaxResponders is the most responders a pod may name.
const MaxResponders = 10

// The resources of lifecycle.k8s.io/v1alpha1 (Kubernetes 1.38, gate
// EvictionRequestAPI). An alpha API may change shape from one minor to the
// next: runnerguard reads them as unstructured objects into the few fields
// below, so a change elsewhere in them costs it nothing, and its k8s.io/api
// need not follow the alpha.
var (
	GroupVersion     = schema.GroupVersion{Group: "lifecycle.k8s.io", Version: "v1alpha1"}
	Evictions        = GroupVersion.WithResource("evictions")
	EvictionRequests = GroupVersion.WithResource("evictionrequests")
)

// Served reports whether the API server's resources of
// lifecycle.k8s.io/v1alpha1 (discovery) include both Evictions, with their
// status, and EvictionRequests: the server then has the gate on, keeps a
// pod's spec.evictionResponders and runs the responder model.
func Served(list *metav1.APIResourceList) bool {
	if list == nil || list.GroupVersion != GroupVersion.String() {
		return false
	}
	names := make([]string, 0, len(list.APIResources))
	for _, r := range list.APIResources {
		names = append(names, r.Name)
	}
	return slices.Contains(names, Evictions.Resource) && slices.Contains(names, Evictions.Resource+"/status") &&
		slices.Contains(names, EvictionRequests.Resource)
}

// ServedBy reports whether the API server dc talks to serves eviction
// requests (Served). A server that does not, or whose discovery fails, is
// taken not to: runnerguard then does as on any older server.
func ServedBy(dc discovery.ServerResourcesInterface) bool {
	list, err := dc.ServerResourcesForGroupVersion(GroupVersion.String())
	return err == nil && Served(list)
}

// Eviction is what runnerguard reads of a lifecycle.k8s.io/v1alpha1
// Eviction: its target, who asks and its responders' states.
type Eviction struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Target struct {
			Pod *PodRef `json:"pod,omitempty"`
		} `json:"target"`
	} `json:"spec"`
	Status EvictionStatus `json:"status"`
}

// PodRef is an Eviction's or an EvictionRequest's target pod.
type PodRef struct {
	Name string    `json:"name"`
	UID  types.UID `json:"uid"`
}

// EvictionStatus is the part of an Eviction's status runnerguard reads.
type EvictionStatus struct {
	Conditions       []metav1.Condition `json:"conditions,omitempty"`
	Requesters       []Requester        `json:"requesters,omitempty"`
	TargetResponders []TargetResponder  `json:"targetResponders,omitempty"`
	Responders       []ResponderStatus  `json:"responders,omitempty"`
}

// Requester is one requester of an Eviction and its intent.
type Requester struct {
	Name   string `json:"name"`
	Intent string `json:"intent"`
}

// TargetResponder is one responder of an Eviction and its state, which
// the evictionrequest controller assigns.
type TargetResponder struct {
	Name     string `json:"name"`
	Priority *int32 `json:"priority,omitempty"`
	State    State  `json:"state"`
}

// State is a responder's state in an Eviction.
type State string

// The states the controller assigns.
const (
	Inactive    State = "Inactive"
	Active      State = "Active"
	Interrupted State = "Interrupted"
	Canceled    State = "Canceled"
	Completed   State = "Completed"
)

// IntentEviction is a requester's intent to have the target evicted; the
// other, Withdrawn, takes it back.
const IntentEviction = "Eviction"

// ResponderStatus is one responder's own account in an Eviction: the
// controller sets its start, the responder the rest.
type ResponderStatus struct {
	Name                   string       `json:"name"`
	StartTime              *metav1.Time `json:"startTime,omitempty"`
	HeartbeatTime          *metav1.Time `json:"heartbeatTime,omitempty"`
	ExpectedCompletionTime *metav1.Time `json:"expectedCompletionTime,omitempty"`
	CompletionTime         *metav1.Time `json:"completionTime,omitempty"`
	Message                *string      `json:"message,omitempty"`
}

// FromUnstructured reads an Eviction.
func FromUnstructured(u *unstructured.Unstructured) (*Eviction, error) {
	e := &Eviction{}
	return e, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, e)
}

// Turn is runnerguard's state in e, "" when e does not name it.
func (e *Eviction) Turn() State {
	for _, r := range e.Status.TargetResponders {
		if r.Name == Name {
			return r.State
		}
	}
	return ""
}

// Own is runnerguard's own account in e, nil before the controller made it.
func (e *Eviction) Own() *ResponderStatus {
	for i := range e.Status.Responders {
		if e.Status.Responders[i].Name == Name {
			return &e.Status.Responders[i]
		}
	}
	return nil
}

// Asking is the requesters that still ask for the eviction, in the
// status's order.
func (e *Eviction) Asking() []string {
	var names []string
	for _, r := range e.Status.Requesters {
		if r.Intent == IntentEviction {
			names = append(names, r.Name)
		}
	}
	return names
}

// Requests is the EvictionRequests behind e: the controller makes each
// one an owner of the Eviction.
func (e *Eviction) Requests() []string {
	var names []string
	for _, o := range e.OwnerReferences {
		if o.Kind == "EvictionRequest" && o.APIVersion == GroupVersion.String() {
			names = append(names, o.Name)
		}
	}
	slices.Sort(names)
	return names
}

// StatusApply is the server-side apply of runnerguard's own account s in
// the status of Eviction namespace/name: only its entry of the responders
// (a list keyed by name), so the controller's fields and the other
// responders' stay theirs. The start time the controller set is carried,
// as the API requires it on an active responder's entry.
func StatusApply(namespace, name string, s ResponderStatus) *unstructured.Unstructured {
	entry := map[string]any{"name": Name}
	put := func(k string, t *metav1.Time) {
		if t != nil {
			entry[k] = t.UTC().Format(time.RFC3339)
		}
	}
	put("startTime", s.StartTime)
	put("heartbeatTime", s.HeartbeatTime)
	put("expectedCompletionTime", s.ExpectedCompletionTime)
	put("completionTime", s.CompletionTime)
	if s.Message != nil {
		entry["message"] = *s.Message
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": GroupVersion.String(),
		"kind":       "Eviction",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"status":     map[string]any{"responders": []any{entry}},
	}}
	return u
}

// Progress is what a drainer shows of e: the responder whose turn it is
// and its last word, or the Eviction's end; "" before the controller has
// begun. The message is the responder's own: the caller escapes it.
func (e *Eviction) Progress() string {
	for _, c := range e.Status.Conditions {
		if c.Status == metav1.ConditionTrue && (c.Type == "TargetEvicted" || c.Type == "Failed") {
			return fmt.Sprintf("%s (%s)", c.Type, c.Reason)
		}
	}
	for _, t := range e.Status.TargetResponders {
		if t.State != Active {
			continue
		}
		for _, s := range e.Status.Responders {
			if s.Name == t.Name && s.Message != nil {
				return fmt.Sprintf("%s: %s", t.Name, *s.Message)
			}
		}
		return t.Name + " is active"
	}
	return ""
}
