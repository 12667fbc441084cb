package guard

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"

	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// isOwner is rule 7: the requester is the recorded creator, or an owner
// principal of the pod's preset, and is a principal that a namespace editor
// cannot wear. `edit` in the pod's namespace may impersonate any
// ServiceAccount there and mint its tokens, so a ServiceAccount of the pod's
// own namespace is taken as the owner only when it proves more than its
// name:
//   - a fleet whose owner is a runner pod (fleet.Owner.RunnerPodLabel;
//     ARC's workflow pods): the runner that created the job pod acts with
//     its own pod's bound token, so the token must be bound to the pod the
//     job pod names in that label. One job's runner cannot end
//     another's, and an impersonated name (no pod claim) is no owner. A
//     namespace editor can still mint a token bound to that runner pod
//     (TokenRequest with boundObjectRef) or exec into it and read its
//     token: it could already act as that runner.
//   - a fleet whose owner is a manager (GitLab): the manager acts with its
//     own pod's bound token, and a job
//     with its build pod's, so the token must be bound to a pod that runs
//     no job, or be the very credential the pod was created with
//     (runnerpod.CreatedWith: a manager outside the cluster, or with a
//     long-lived token, uses the same token for the CREATE and for every
//     exec and delete that follow). An impersonated name (no pod claim, no
//     credential), a token minted anew, or a job running as the manager's
//     ServiceAccount is no owner. A namespace editor can still mint a token
//     bound to the manager's pod, create a pod of that ServiceAccount, exec
//     into the manager, or read a token the manager keeps in a Secret of
//     that namespace: it could already act as the manager. A preset that
//     opts in (ownerInRunnerNamespace) takes the name alone.
//
// When the requester is named but not taken, the second result says why
// and what to change.
func isOwner(pod *corev1.Pod, f Facts, p runnerpod.Preset) (bool, string) {
	requester := f.Requester
	if requester == "" {
		return false, ""
	}
	if !p.NamesOwner(pod, requester) {
		return false, ""
	}
	saNamespace, _, err := serviceaccount.SplitUsername(requester)
	if err != nil || saNamespace != pod.Namespace {
		return true, ""
	}
	switch label := presets.OwnerOf(p.Name).RunnerPodLabel; {
	case label != "":
		runner := pod.Labels[label]
		if runner != "" && f.RequesterPod == runner {
			return true, ""
		}
		bound := "is bound to no pod (an impersonated or long-lived token)"
		if f.RequesterPod != "" {
			bound = fmt.Sprintf("is bound to pod %q", f.RequesterPod)
		}
		return false, fmt.Sprintf("%s is named as the job's owner but is a ServiceAccount of the pod's own namespace, which anyone granted edit in %s can act as, and its token %s, not to the workflow pod's runner pod %q (label %s): only that runner, with its own pod's token, ends this job",
			requester, pod.Namespace, bound, runner, label)
	default:
		if p.OwnerInRunnerNamespace {
			return true, ""
		}
		if f.RequesterPod != "" && createdFromAPod(pod) && f.RequesterPodRunsJob != nil && !f.RequesterPodRunsJob() {
			return true, "" // the manager, with its own pod's token
		}
		if f.RequesterPod == "" && sameCredential(pod, f.RequesterCredential) {
			return true, "" // the manager, with the token it created the pod with
		}
		return false, ownerNotTakenManager(pod, f, p.Name)
	}
}

// createdFromAPod: the pod's creator acted with a token bound to a pod, or
// the pod is older than that record (runnerpod.CreatedFrom): a manager
// that created it with no pod is never taken by a token bound to one.
func createdFromAPod(pod *corev1.Pod) bool {
	from, recorded := pod.Annotations[runnerpod.CreatedFrom]
	return !recorded || from != ""
}

// sameCredential: the request was made with the credential the pod was
// created with, as the injector recorded it.
func sameCredential(pod *corev1.Pod, credential string) bool {
	return credential != "" && pod.Annotations[runnerpod.CreatedWith] == credential
}

// ownerUnknown: the pod's creator was not recorded (it was created while
// the injector was down, or before runnerguard was installed, or the
// injector was made to miss it) and the preset names no owner principals.
// The policy keeps created-by as it was at CREATE, so no one can remove it
// from a pod to make its owner unknown.
func ownerUnknown(pod *corev1.Pod, p runnerpod.Preset) bool {
	_, recorded := pod.Annotations[runnerpod.CreatedBy]
	return !recorded && len(p.OwnerPrincipals) == 0
}

// ownerShown is rule owner-unknown: with no creator recorded and no owner
// principals, the requester is the job's owner only when its token shows
// what isOwner asks of a recorded creator, without the name:
//   - a runner pod as owner (arc-workflow): a token of a ServiceAccount of
//     the pod's namespace, bound to the runner pod the job pod names.
//   - a manager as owner (gitlab): a ServiceAccount's token bound to a pod
//     that runs no job (the manager's own pod, wherever it runs).
//
// A person, an impersonated ServiceAccount (no pod claim), a token bound to
// no pod and a job's own token are refused as they would be anywhere else:
// a pod the injector missed is no pod anyone may end. The fleet's own flow
// goes on (ARC's runner and an in-cluster manager act with their own pods'
// tokens); a GitLab manager outside the cluster is named in ownerPrincipals.
// A workload other than the manager acting with its own pod's token passes
// for it: it is taken, and the Warning Event names it. The second result
// says how the requester was shown to be the owner, or why not.
func ownerShown(pod *corev1.Pod, f Facts, p runnerpod.Preset) (bool, string) {
	saNamespace, _, err := serviceaccount.SplitUsername(f.Requester)
	claim := err == nil && f.RequesterPod != ""
	label := presets.OwnerOf(p.Name).RunnerPodLabel
	runner := pod.Labels[label]
	switch {
	case claim && label != "" && saNamespace == pod.Namespace && runner != "" && f.RequesterPod == runner:
		return true, fmt.Sprintf("%s's token is bound to the runner pod %q the workflow pod names", f.Requester, runner)
	case claim && label == "" && f.RequesterPodRunsJob != nil && !f.RequesterPodRunsJob():
		return true, fmt.Sprintf("%s's token is bound to pod %s/%s, which runs no job: taken as the manager; name it in presets[%s].ownerPrincipals to take no other",
			f.Requester, saNamespace, f.RequesterPod, p.Name)
	}
	shows := "a token bound to a pod that runs no job (the manager's)"
	if label != "" {
		shows = fmt.Sprintf("a token bound to the runner pod it names (%q, label %s)", runner, label)
	}
	bound := "is bound to no pod (a person, an impersonated ServiceAccount or a long-lived token)"
	if claim {
		bound = fmt.Sprintf("is bound to pod %s/%s", saNamespace, f.RequesterPod)
	}
	return false, fmt.Sprintf("the pod has no %s and preset %s no ownerPrincipals, so only %s shows its job's owner, and %s's token %s",
		runnerpod.CreatedBy, p.Name, shows, f.Requester, bound)
}
