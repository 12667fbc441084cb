package fleet

import (
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
)

// OwnView is where a fleet's system keeps its own account of how a job
// ended: conditions of the pod's controlling owner (Tekton's TaskRun, the
// Job Buildkite's stack makes for a job). The record keeps it beside its
// class, since the two can disagree: an evicted TaskRun told as
// succeeded (tektoncd/pipeline#6145), a job the stack retried.
type OwnView struct {
	// Owner is the owner's kind and resource; the chart grants the leader
	// get on it.
	Owner ChartResource
	// Conditions are read in order: the account is final once one of them
	// has status True or False (a TaskRun's Succeeded is Unknown while it
	// runs; a Job's Complete or Failed appears once it ended).
	Conditions []string
	// Anyone who may create pods can name any owner of their namespace in
	// a pod's ownerReferences, so the owner's account is the pod's only
	// where the owner names the pod (PodName, the path of the pod's name
	// in the owner: a TaskRun's status.podName) or the pod's recorded
	// creator is one of Creators (the job controller, for a Job's pods).
	PodName  []string
	Creators []string
}

// OfPod is the account owner gives of pod, nil while it is not final or
// when the owner does not stand for the pod (PodName, Creators).
func (v OwnView) OfPod(owner *unstructured.Unstructured, pod, createdBy string) *v1alpha1.FleetView {
	if len(v.PodName) > 0 {
		if name, _, _ := unstructured.NestedString(owner.Object, v.PodName...); name != pod {
			return nil
		}
	} else if !slices.Contains(v.Creators, createdBy) {
		return nil
	}
	return v.Of(owner)
}

// Owns reports whether ref names an object of the view's owner kind.
func (v OwnView) Owns(ref *metav1.OwnerReference) bool {
	if ref == nil || ref.Kind != v.Owner.Kind {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == v.Owner.Group
}

// Of is the account owner gives, nil while it is not final.
func (v OwnView) Of(owner *unstructured.Unstructured) *v1alpha1.FleetView {
	conds, _, _ := unstructured.NestedSlice(owner.Object, "status", "conditions")
	for _, want := range v.Conditions {
		for _, c := range conds {
			m, ok := c.(map[string]any)
			if !ok || m["type"] != want {
				continue
			}
			status, _ := m["status"].(string)
			if status != "True" && status != "False" {
				continue
			}
			view := &v1alpha1.FleetView{Object: owner.GetKind() + "/" + owner.GetName(), Condition: want, Status: status,
				Reason: cut(str(m["reason"]), 256), Message: cut(str(m["message"]), 1024)}
			if t, err := time.Parse(time.RFC3339, str(m["lastTransitionTime"])); err == nil {
				view.At = &metav1.Time{Time: t}
			}
			return view
		}
	}
	return nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// cut keeps at most n bytes of s, as valid UTF-8.
func cut(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "")
}
