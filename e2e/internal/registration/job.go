package registration

import (
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// JobSubresources are the pods' subresources whose UPDATE can end a busy
// runner's job without a delete (besides the pod itself): an ephemeral
// container shares the runner's process namespace when it targets it, and a
// resize can shrink the runner's memory under its use.
var JobSubresources = []string{"pods/ephemeralcontainers", "pods/resize"}

// jobVariables say, in the API server, whether an UPDATE of a runner pod
// meets a busy runner (as the DELETE webhook's matchConditions judge it:
// not terminating, not finished, a runner container running; the fleets'
// idle signals need the guard, so an idle runner counts as busy here) and
// whether its requester may end the job anyway: a fleet's controller, or
// anyone once an operator has written the override on the pod (they may
// then delete it outright), or a principal granted the override.
func jobVariables(cfg config.Config) []admissionregistrationv1.Variable {
	names := celList(cfg.RunnerContainerNames())
	override := annotationPath(runnerpod.AllowDelete)
	return []admissionregistrationv1.Variable{
		{Name: "busy", Expression: "!variables.creating && !has(oldObject.metadata.deletionTimestamp) && " +
			"!(oldObject.status.?phase.orValue('') in ['Succeeded', 'Failed']) && " +
			"oldObject.status.?containerStatuses.orValue([]).exists(s, s.name in " + names + " && has(s.state) && has(s.state.running))"},
		{Name: "mayEndJob", Expression: "request.userInfo.username in " + celList(controllers(cfg)) +
			" || oldObject" + override + ".orValue('').trim() != '' || variables.mayOverride"},
	}
}

// controllers are every preset's controller principals, sorted, once each.
func controllers(cfg config.Config) []string {
	var all []string
	for _, p := range cfg.Presets {
		all = append(all, p.ControllerPrincipals...)
	}
	slices.Sort(all)
	return slices.Compact(all)
}

// jobRules refuse the UPDATEs that end or endanger a busy runner's job
// without a delete, unless variables.mayEndJob. Each is cheap first: the
// field unchanged, as it is in nearly every update (the kubelet's status
// writes among them, whose spec the API server keeps as it was).
func jobRules(cfg config.Config) []admissionregistrationv1.Validation {
	names := celList(cfg.RunnerContainerNames())
	rule := func(unchanged, msg string) admissionregistrationv1.Validation {
		return admissionregistrationv1.Validation{
			Expression: unchanged + " || !variables.busy || variables.mayEndJob",
			Message: fmt.Sprintf("runnerguard: %s; a runner container of this pod is running (taken to be busy with a job): "+
				"only a principal granted the verb %q on %s.%s in this namespace may do this, or anyone once one has set %s on the pod",
				msg, OverrideVerb, OverrideResource, OverrideGroup, runnerpod.AllowDelete),
			Reason: ptr.To(metav1.StatusReasonForbidden),
		}
	}
	return []admissionregistrationv1.Validation{
		// The API server lets an UPDATE only add or shorten it.
		rule("object.spec.?activeDeadlineSeconds == oldObject.spec.?activeDeadlineSeconds",
			"spec.activeDeadlineSeconds set or shortened on a busy runner would have the kubelet kill its job"),
		// A new image restarts the container: the job in it ends.
		rule("object.spec.containers.map(c, c.image) == oldObject.spec.containers.map(c, c.image) && "+
			"object.spec.?initContainers.orValue([]).map(c, c.image) == oldObject.spec.?initContainers.orValue([]).map(c, c.image)",
			"a container's image changed on a busy runner would restart it and end its job"),
		// An UPDATE may add tolerations and shorten tolerationSeconds; the
		// shortest matching one decides how soon a NoExecute taint evicts.
		rule("object.spec.?tolerations.orValue([]).filter(t, has(t.tolerationSeconds)) == oldObject.spec.?tolerations.orValue([]).filter(t, has(t.tolerationSeconds))",
			"tolerationSeconds set or shortened on a busy runner would let a NoExecute taint evict it"),
		rule("object.spec.?ephemeralContainers.orValue([]).size() == oldObject.spec.?ephemeralContainers.orValue([]).size()",
			"an ephemeral container added to a busy runner pod can reach the job's processes"),
		rule("object.spec.containers.all(c, !(c.name in "+names+") || oldObject.spec.containers.exists(o, o.name == c.name && o.?resources == c.?resources))",
			"a runner container resized while busy can run out of memory or CPU under its job"),
	}
}
