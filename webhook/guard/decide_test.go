package guard

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/fleet/arclegacy"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/runnerguard/runnerguard/internal/fleet/arcworkflow"
	"github.com/runnerguard/runnerguard/internal/fleet/generic"
	"github.com/runnerguard/runnerguard/internal/fleet/gitlab"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

const reaper = "system:serviceaccount:ci:reaper"

func TestDecide(t *testing.T) {
	now := podtest.Start.Add(41*time.Minute + 12*time.Second)
	cfg := withOwner(gitlab.Name, "system:serviceaccount:gitlab:manager")
	weekAgo := now.Add(-168 * time.Hour)
	noOwners := configtest.Enforcing()
	arc := "system:serviceaccount:arc-systems:arc-gha-rs-controller"
	cases := []struct {
		name      string
		pod       *corev1.Pod
		op        Operation
		requester string
		boundPod  string
		// credential is the request's credential id (its token's JTI).
		credential string
		// jobPods are the pods that run jobs, for RequesterPodRunsJob.
		jobPods  []string
		job      JobSignal
		deleting bool
		// node is the pod's node, for its drain deadline.
		node    *corev1.Node
		cfg     *config.Config
		mode    config.Mode
		rule    runnerpod.Rule
		allowed bool
		warned  bool
		msg     []string
	}{
		{name: "warn mode: a busy runner's delete is allowed, saying enforce would refuse it",
			pod: podtest.Runner("ci", "r").Running("runner").Obj(), requester: "reaper", mode: config.ModeWarn,
			rule: runnerpod.RuleBusy, allowed: true, warned: true, msg: []string{"runnerguard (warn mode) allowed this; enforce mode would have refused it: ", "has been running for 41m (since 2026-11-01T12:00:00Z) and", "removing the pod now loses that job",
				`enforce mode would wait for the job to end, unless someone granted the verb "override" on runners.runnerguard.io in ci (the ClusterRole runnerguard-override in a default install) first ran: kubectl annotate pod -n ci r runnerguard.io/allow-delete="<reason>"`}},
		{name: "warn mode changes nothing for an override",
			pod: podtest.Runner("ci", "r").Running("runner").Annotate(runnerpod.AllowDelete, "drain").Obj(), requester: "ops", mode: config.ModeWarn,
			rule: runnerpod.RuleOverride, allowed: true},
		{name: "warn mode changes nothing for an idle runner",
			pod: podtest.ARCScaleSet("ci", "r").Running("runner").Obj(), job: JobNone, mode: config.ModeWarn, rule: runnerpod.RuleIdle, allowed: true},
		{name: "a busy runner on a node whose drain deadline passed may go, naming who set it",
			pod: podtest.Runner("ci", "r").Node("node-7").Running("runner").Obj(), requester: "system:serviceaccount:kube-system:upgrader",
			node: drainNode(now.Add(-time.Second), "alice"), rule: runnerpod.RuleNodeDrain, allowed: true,
			msg: []string{"allowed by node node-7's runnerguard.io/drain-deadline 2026-11-01T12:41:11Z, set by alice"}},
		{name: "a busy runner on a node whose drain deadline is still ahead is protected",
			pod: podtest.Runner("ci", "r").Node("node-7").Running("runner").Obj(), requester: reaper,
			node: drainNode(now.Add(time.Minute), "alice"), rule: runnerpod.RuleBusy},
		{name: "a drain deadline that names no setter frees nothing",
			pod: podtest.Runner("ci", "r").Node("node-7").Running("runner").Obj(), requester: reaper,
			node: drainNode(now.Add(-time.Hour), ""), rule: runnerpod.RuleBusy},
		{name: "an override decides before the node's drain deadline",
			pod: podtest.Runner("ci", "r").Node("node-7").Running("runner").Annotate(runnerpod.AllowDelete, "drain").Obj(), requester: "ops",
			node: drainNode(now.Add(-time.Hour), "alice"), rule: runnerpod.RuleOverride, allowed: true},
		{name: "an idle runner on a draining node is idle, and its node is not read",
			pod: podtest.ARCScaleSet("ci", "r").Node("node-7").Running("runner").Obj(), job: JobNone,
			node: drainNode(now.Add(-time.Hour), "alice"), rule: runnerpod.RuleIdle, allowed: true},
		{name: "a pod without a runner container is not judged",
			pod: podtest.Plain("ci", "web").Running("app").Obj(), rule: runnerpod.RuleNotRunnerPod, allowed: true},
		{name: "a runner container name of a disabled preset is not a runner pod",
			pod: podtest.Runner("ci", "r").Running("runner").Obj(), cfg: disabled(generic.Name), rule: runnerpod.RuleNotRunnerPod, allowed: true},
		{name: "a pod already terminating is allowed (kubelet's final delete)",
			pod: podtest.Runner("ci", "r").Running("runner").Terminating(now).Obj(), rule: runnerpod.RuleTerminating, allowed: true},
		{name: "a succeeded pod is allowed (the watcher records the death)",
			pod: podtest.Runner("ci", "r").Terminated("runner", 0, "Completed").Phase(corev1.PodSucceeded).Obj(), rule: runnerpod.RulePodFinished, allowed: true},
		{name: "a failed pod is allowed (the watcher records the death)",
			pod: podtest.Runner("ci", "r").Terminated("runner", 137, "OOMKilled").Phase(corev1.PodFailed).Obj(), rule: runnerpod.RulePodFinished, allowed: true},
		{name: "a failed pod whose runner never ran is allowed",
			pod: podtest.GitLab("ci", "g").Waiting("build", "PodInitializing").Phase(corev1.PodFailed).Obj(), rule: runnerpod.RulePodFinished, allowed: true},
		{name: "a runner with no status yet is allowed (the wedge case)",
			pod: podtest.Runner("ci", "r").Obj(), rule: runnerpod.RuleNotStarted, allowed: true},
		{name: "a runner waiting behind its image pull is allowed",
			pod: podtest.Runner("ci", "r").Waiting("runner", "ImagePullBackOff").Obj(), rule: runnerpod.RuleNotStarted, allowed: true},
		{name: "a pod whose only running container is not the runner is not started",
			pod: podtest.GitLab("ci", "g").Running("helper").Obj(), rule: runnerpod.RuleNotStarted, allowed: true},
		{name: "a terminated runner is allowed (the watcher records the death)",
			pod: podtest.Runner("ci", "r").Terminated("runner", 1, "Error").Obj(), rule: runnerpod.RuleRunnerTerminated, allowed: true},
		{name: "a runner waiting to restart after a crash counts as terminated",
			pod: podtest.Runner("ci", "r").Restarting("runner", 139, "Error").Obj(), rule: runnerpod.RuleRunnerTerminated, allowed: true},
		{name: "an ARC runner whose EphemeralRunner has no job is idle",
			pod: podtest.ARCScaleSet("ci", "r").Running("runner").Obj(), job: JobNone, rule: runnerpod.RuleIdle, allowed: true},
		{name: "an ARC runner with a job assigned is busy",
			pod: podtest.ARCScaleSet("ci", "r").Running("runner").Obj(), job: JobAssigned, rule: runnerpod.RuleBusy, msg: []string{"with a job assigned"}},
		{name: "an ARC runner whose EphemeralRunner cannot be read is busy",
			pod: podtest.ARCScaleSet("ci", "r").Running("runner").Obj(), job: JobUnreadable, rule: runnerpod.RuleBusy, msg: []string{"could not be read"}},
		{name: "a busy ARC runner is protected even from ARC's own controller",
			pod: podtest.ARCScaleSet("ci", "r").Running("runner").Obj(), requester: "system:serviceaccount:arc-systems:arc-gha-rs-controller", job: JobAssigned, rule: runnerpod.RuleBusy},
		{name: "ARC's delete of a runner still shutting down passes once its job is over (RemoveRunner accepted, finalizer removed)",
			pod: podtest.ARCScaleSet("ci", "r").Running("runner").Obj(), requester: arc, job: JobOver, deleting: true, rule: runnerpod.RuleJobOver, allowed: true,
			msg: []string{"the runner has no job left", arcscaleset.RegistrationFinalizer}},
		{name: "a job that is over is over for anyone: the runner has nothing left to lose",
			pod: podtest.ARCScaleSet("ci", "r").Running("runner").Obj(), requester: reaper, job: JobOver, deleting: true, rule: runnerpod.RuleJobOver, allowed: true},
		{name: "a busy runner whose EphemeralRunner is being deleted says ARC ends it once the job ends",
			pod: podtest.ARCScaleSet("ci", "r").Running("runner").Obj(), requester: reaper, job: JobAssigned, deleting: true, rule: runnerpod.RuleBusy,
			msg: []string{"with a job assigned", "its EphemeralRunner is being deleted: ARC deletes this pod itself once the Actions service accepts"}},
		{name: "the job-over signal is ARC's alone: a generic runner never has it",
			pod: podtest.Runner("ci", "r").Running("runner").Obj(), requester: reaper, job: JobOver, rule: runnerpod.RuleBusy},
		{name: "a legacy ARC runner that was unregistered is idle",
			pod: podtest.ARCLegacy("ci", "r").Running("runner").Annotate(arclegacy.Unregistered, "2026-11-01T12:00:00Z").Obj(), rule: runnerpod.RuleIdle, allowed: true},
		{name: "a registered legacy ARC runner is busy",
			pod: podtest.ARCLegacy("ci", "r").Running("runner").Obj(), rule: runnerpod.RuleBusy},
		{name: "GitLab's manager deleting the build pod it created ends its job",
			pod: podtest.GitLab("ci", "g").Running("build").Annotate(runnerpod.CreatedBy, "system:serviceaccount:gitlab:runner").Obj(), requester: "system:serviceaccount:gitlab:runner", rule: runnerpod.RuleJobOwner, allowed: true},
		{name: "a configured owner principal ends a job of a pod created while the injector was down",
			pod: podtest.GitLab("ci", "g").Running("build").Obj(), requester: "system:serviceaccount:gitlab:manager", rule: runnerpod.RuleJobOwner, allowed: true},
		{name: "one preset's owner principal owns no job of another preset",
			pod: podtest.ARCWorkflow("ci", "r").Running("job").Annotate(runnerpod.CreatedBy, "system:serviceaccount:ci:runner").Obj(), requester: "system:serviceaccount:gitlab:manager", rule: runnerpod.RuleBusy},
		{name: "a GitLab build pod that missed the injector, with no owner principals, may be ended by its manager with its own pod's token",
			pod: podtest.GitLab("ci", "g").Running("build").Obj(), cfg: &noOwners, requester: "system:serviceaccount:gitlab:runner", boundPod: "gitlab-runner-7d9f", rule: runnerpod.RuleOwnerUnknown, allowed: true,
			msg: []string{"owner was not recorded", "no runnerguard.io/created-by", "preset gitlab has no ownerPrincipals", "bound to pod gitlab/gitlab-runner-7d9f, which runs no job"}},
		{name: "a reaper with edit may not end a busy GitLab build pod that missed the injector, saying why",
			pod: podtest.GitLab("ci", "g").Running("build").Obj(), cfg: &noOwners, requester: reaper, rule: runnerpod.RuleBusy,
			msg: []string{"only a token bound to a pod that runs no job (the manager's) shows its job's owner", "token is bound to no pod"}},
		{name: "a person may not either",
			pod: podtest.GitLab("ci", "g").Running("build").Obj(), cfg: &noOwners, requester: "dana@example.com", rule: runnerpod.RuleBusy},
		{name: "a reaper impersonating the manager's ServiceAccount carries no pod claim and is refused",
			pod: podtest.GitLab("ci", "g").Running("build").Obj(), cfg: &noOwners, requester: "system:serviceaccount:ci:gitlab-runner", rule: runnerpod.RuleBusy},
		{name: "a job's own token may not end another job's build pod that missed the injector",
			pod: podtest.GitLab("ci", "g").Running("build").Obj(), cfg: &noOwners, requester: "system:serviceaccount:ci:default", boundPod: "other-build", jobPods: []string{"other-build"},
			rule: runnerpod.RuleBusy, msg: []string{"token is bound to pod ci/other-build"}},
		{name: "any workload acting with its own pod's token passes for the manager of a GitLab pod that missed the injector, and is named",
			pod: podtest.GitLab("ci", "g").Running("build").Obj(), cfg: &noOwners, requester: "system:serviceaccount:ci-infra:orphan-reaper", boundPod: "orphan-reaper-0", rule: runnerpod.RuleOwnerUnknown, allowed: true,
			msg: []string{"system:serviceaccount:ci-infra:orphan-reaper's token is bound to pod ci-infra/orphan-reaper-0", "name it in presets[gitlab].ownerPrincipals to take no other"}},
		{name: "GitLab's manager outside the cluster shows no pod: refused on a pod that missed the injector, saying what shows the owner",
			pod: podtest.GitLab("ci", "g").Running("build").Obj(), cfg: &noOwners, requester: "system:serviceaccount:ci:gitlab-runner", credential: "JTI=manager", rule: runnerpod.RuleBusy,
			msg: []string{"only a token bound to a pod that runs no job (the manager's) shows its job's owner"}},
		{name: "a workflow pod that missed the injector may be ended by the runner it names, with its pod's token",
			pod: podtest.ARCWorkflow("ci", "r").Running("job").Obj(), cfg: &noOwners, requester: "system:serviceaccount:ci:runner", boundPod: "r", rule: runnerpod.RuleOwnerUnknown, allowed: true,
			msg: []string{`bound to the runner pod "r" the workflow pod names`}},
		{name: "another runner's token may not end a workflow pod that missed the injector",
			pod: podtest.ARCWorkflow("ci", "r").Running("job").Obj(), cfg: &noOwners, requester: "system:serviceaccount:ci:runner", boundPod: "r2", rule: runnerpod.RuleBusy,
			msg: []string{`only a token bound to the runner pod it names ("r"`, "bound to pod ci/r2"}},
		{name: "a token bound to a pod of that name in another namespace is not the runner's",
			pod: podtest.ARCWorkflow("ci", "r").Running("job").Obj(), cfg: &noOwners, requester: "system:serviceaccount:elsewhere:runner", boundPod: "r", rule: runnerpod.RuleBusy},
		{name: "a reaper may not end a workflow pod that missed the injector",
			pod: podtest.ARCWorkflow("ci", "r").Running("job").Obj(), cfg: &noOwners, requester: reaper, rule: runnerpod.RuleBusy},
		{name: "the exempt principals still end a pod whose owner was not recorded",
			pod: podtest.GitLab("ci", "g").Running("build").Obj(), cfg: &noOwners, requester: config.NamespaceController, rule: runnerpod.RuleExempt, allowed: true},
		{name: "the override on the pod lets a reaper end a pod whose owner was not recorded",
			pod: podtest.GitLab("ci", "g").Running("build").Annotate(runnerpod.AllowDelete, "stuck job").Obj(), cfg: &noOwners, requester: reaper, rule: runnerpod.RuleOverride, allowed: true},
		{name: "a GitLab pod that missed the injector is free once its build container ended",
			pod: podtest.GitLab("ci", "g").Terminated("build", 0, "Completed").Running("helper").Obj(), cfg: &noOwners, requester: reaper, rule: runnerpod.RuleRunnerTerminated, allowed: true},
		{name: "with owner principals configured, a pod that missed the injector is theirs alone",
			pod: podtest.GitLab("ci", "g").Running("build").Obj(), requester: reaper, rule: runnerpod.RuleBusy},
		{name: "a recorded creator is the owner even without owner principals",
			pod: podtest.GitLab("ci", "g").Running("build").Annotate(runnerpod.CreatedBy, "system:serviceaccount:gitlab:runner").Obj(), cfg: &noOwners, requester: reaper, rule: runnerpod.RuleBusy},
		{name: "an owner-unknown pod is a preset's whose owner ends the job: a generic runner stays protected",
			pod: podtest.Runner("ci", "r").Running("runner").Obj(), cfg: &noOwners, requester: reaper, rule: runnerpod.RuleBusy},
		{name: "ARC's runner deleting its workflow pod with its own pod's token ends its job",
			pod: podtest.ARCWorkflow("ci", "r").Running("job").Annotate(runnerpod.CreatedBy, "system:serviceaccount:ci:runner").Obj(), requester: "system:serviceaccount:ci:runner", boundPod: "r", rule: runnerpod.RuleJobOwner, allowed: true},
		{name: "ARC's runner SA impersonated (no pod claim) is no owner: edit in the namespace can wear it",
			pod: podtest.ARCWorkflow("ci", "r").Running("job").Annotate(runnerpod.CreatedBy, "system:serviceaccount:ci:runner").Obj(), requester: "system:serviceaccount:ci:runner", rule: runnerpod.RuleBusy,
			msg: []string{"system:serviceaccount:ci:runner is named as the job's owner but is a ServiceAccount of the pod's own namespace", "its token is bound to no pod", `not to the workflow pod's runner pod "r" (label runner-pod)`}},
		{name: "one job's runner cannot end another job's workflow pod",
			pod: podtest.ARCWorkflow("ci", "r").Running("job").Annotate(runnerpod.CreatedBy, "system:serviceaccount:ci:runner").Obj(), requester: "system:serviceaccount:ci:runner", boundPod: "other-runner", rule: runnerpod.RuleBusy,
			msg: []string{`its token is bound to pod "other-runner", not to the workflow pod's runner pod "r"`}},
		{name: "a job running as the runner's SA holds a token bound to its own workflow pod: no owner",
			pod: podtest.ARCWorkflow("ci", "r").Running("job").Annotate(runnerpod.CreatedBy, "system:serviceaccount:ci:runner").Obj(), requester: "system:serviceaccount:ci:runner", boundPod: "r-workflow", rule: runnerpod.RuleBusy},
		{name: "a token bound to the runner pod proves nothing for a workflow pod with no runner-pod label value",
			pod: podtest.ARCWorkflow("ci", "").Running("job").Annotate(runnerpod.CreatedBy, "system:serviceaccount:ci:runner").Obj(), requester: "system:serviceaccount:ci:runner", boundPod: "", rule: runnerpod.RuleBusy},
		{name: "an arc-workflow owner principal of the same namespace needs the runner pod's token too",
			pod: podtest.ARCWorkflow("ci", "r").Running("job").Obj(), cfg: ptr.To(withOwner(arcworkflow.Name, "system:serviceaccount:ci:runner")), requester: "system:serviceaccount:ci:runner", rule: runnerpod.RuleBusy},
		{name: "an arc-workflow owner principal of the same namespace with the runner pod's token is the owner",
			pod: podtest.ARCWorkflow("ci", "r").Running("job").Obj(), cfg: ptr.To(withOwner(arcworkflow.Name, "system:serviceaccount:ci:runner")), requester: "system:serviceaccount:ci:runner", boundPod: "r", rule: runnerpod.RuleJobOwner, allowed: true},
		{name: "GitLab's manager in the build pods' own namespace is no owner without the opt-in",
			pod: podtest.GitLab("ci", "g").Running("build").Annotate(runnerpod.CreatedBy, "system:serviceaccount:ci:gitlab-runner").Obj(), requester: "system:serviceaccount:ci:gitlab-runner", rule: runnerpod.RuleBusy,
			msg: []string{"system:serviceaccount:ci:gitlab-runner is named as the job's owner but is a ServiceAccount of the pod's own namespace, which anyone granted edit in ci can impersonate",
				"its token is bound to no pod and states no credential id (an impersonated name, or a legacy Secret token", "presets.gitlab.ownerInRunnerNamespace: true"}},
		{name: "GitLab's manager in the build pods' namespace, outside the cluster with one long-lived token, ends the job it created with that token",
			pod: gitlabCreatedWith("system:serviceaccount:ci:gitlab-runner", "JTI=manager"), requester: "system:serviceaccount:ci:gitlab-runner", credential: "JTI=manager", rule: runnerpod.RuleJobOwner, allowed: true},
		{name: "a reaper with edit minting a new token for the same-namespace manager is no owner: its credential is not the pod's",
			pod: gitlabCreatedWith("system:serviceaccount:ci:gitlab-runner", "JTI=manager"), requester: "system:serviceaccount:ci:gitlab-runner", credential: "JTI=minted", rule: runnerpod.RuleBusy,
			msg: []string{"is not the one the pod was created with (runnerguard.io/created-with): a token minted anew", "kubectl create token"}},
		{name: "a reaper impersonating the same-namespace manager carries no credential: no owner",
			pod: gitlabCreatedWith("system:serviceaccount:ci:gitlab-runner", "JTI=manager"), requester: "system:serviceaccount:ci:gitlab-runner", rule: runnerpod.RuleBusy,
			msg: []string{"states no credential id"}},
		{name: "a pod created with no credential id cannot be matched by one",
			pod: podtest.GitLab("ci", "g").Running("build").Annotate(runnerpod.CreatedBy, "system:serviceaccount:ci:gitlab-runner").Obj(), requester: "system:serviceaccount:ci:gitlab-runner", credential: "JTI=manager", rule: runnerpod.RuleBusy,
			msg: []string{"the pod was created with no credential id in runnerguard.io/created-with"}},
		{name: "the creator's credential held by another principal proves nothing: the name must match too",
			pod: gitlabCreatedWith("system:serviceaccount:ci:gitlab-runner", "JTI=manager"), requester: reaper, credential: "JTI=manager", rule: runnerpod.RuleBusy},
		{name: "a job running as the manager's ServiceAccount with its build pod's token is no owner even if the pod names a credential",
			pod: gitlabCreatedWith("system:serviceaccount:ci:gitlab-runner", "JTI=manager"), requester: "system:serviceaccount:ci:gitlab-runner", boundPod: "runner-abc-project-1", credential: "JTI=manager", jobPods: []string{"runner-abc-project-1"}, rule: runnerpod.RuleBusy},
		{name: "warn mode: the same-namespace manager with a minted token is allowed, saying enforce would refuse it",
			pod: gitlabCreatedWith("system:serviceaccount:ci:gitlab-runner", "JTI=manager"), requester: "system:serviceaccount:ci:gitlab-runner", credential: "JTI=other", mode: config.ModeWarn, rule: runnerpod.RuleBusy, allowed: true, warned: true},
		{name: "GitLab's manager in the build pods' namespace, with its own pod's token, ends the job it created",
			pod: podtest.GitLab("ci", "g").Running("build").Annotate(runnerpod.CreatedBy, "system:serviceaccount:ci:gitlab-runner").Obj(), requester: "system:serviceaccount:ci:gitlab-runner", boundPod: "gitlab-runner-7d9f", rule: runnerpod.RuleJobOwner, allowed: true},
		{name: "a manager that created the pod from a pod ends it with its pod's token",
			pod: podtest.GitLab("ci", "g").Running("build").Annotate(runnerpod.CreatedBy, "system:serviceaccount:ci:gitlab-runner").Annotate(runnerpod.CreatedFrom, "gitlab-runner-7d9f").Obj(), requester: "system:serviceaccount:ci:gitlab-runner", boundPod: "gitlab-runner-7d9f", rule: runnerpod.RuleJobOwner, allowed: true},
		{name: "a manager that created the pod with no pod (one token, outside the cluster) is no owner by a token bound to a pod: an editor's pod of its ServiceAccount",
			pod: podtest.GitLab("ci", "g").Running("build").Annotate(runnerpod.CreatedBy, "system:serviceaccount:ci:gitlab-runner").Annotate(runnerpod.CreatedWith, "JTI=manager").Annotate(runnerpod.CreatedFrom, "").Obj(), requester: "system:serviceaccount:ci:gitlab-runner", boundPod: "decoy", credential: "JTI=decoy", rule: runnerpod.RuleBusy,
			msg: []string{`its token is bound to pod "decoy", but the pod was created with a token bound to no pod`}},
		{name: "a job running as the same-namespace manager's ServiceAccount, with its build pod's token, is no owner",
			pod: podtest.GitLab("ci", "g").Running("build").Annotate(runnerpod.CreatedBy, "system:serviceaccount:ci:gitlab-runner").Obj(), requester: "system:serviceaccount:ci:gitlab-runner", boundPod: "runner-abc-project-1", jobPods: []string{"runner-abc-project-1"}, rule: runnerpod.RuleBusy,
			msg: []string{`its token is bound to pod "runner-abc-project-1", which runs a job`}},
		{name: "a same-namespace GitLab owner principal is no owner without the opt-in either",
			pod: podtest.GitLab("ci", "g").Running("build").Obj(), cfg: ptr.To(withOwner(gitlab.Name, "system:serviceaccount:ci:gitlab-runner")), requester: "system:serviceaccount:ci:gitlab-runner", rule: runnerpod.RuleBusy, msg: []string{"ownerInRunnerNamespace"}},
		{name: "with the opt-in, GitLab's manager in the build pods' namespace is the owner",
			pod: podtest.GitLab("ci", "g").Running("build").Annotate(runnerpod.CreatedBy, "system:serviceaccount:ci:gitlab-runner").Obj(), cfg: inRunnerNamespace(withOwner(gitlab.Name, "system:serviceaccount:ci:gitlab-runner")), requester: "system:serviceaccount:ci:gitlab-runner", rule: runnerpod.RuleJobOwner, allowed: true},
		{name: "the opt-in does not make the same-namespace manager the owner of a job it neither created nor is named for",
			pod: podtest.GitLab("ci", "g").Running("build").Annotate(runnerpod.CreatedBy, "system:serviceaccount:ci:gitlab-runner").Obj(), cfg: inRunnerNamespace(withOwner(gitlab.Name, "system:serviceaccount:ci:gitlab-runner")), requester: reaper, rule: runnerpod.RuleBusy},
		{name: "a person who created a build pod is its owner: edit cannot impersonate users",
			pod: podtest.GitLab("ci", "g").Running("build").Annotate(runnerpod.CreatedBy, "alice@example.com").Obj(), requester: "alice@example.com", rule: runnerpod.RuleJobOwner, allowed: true},
		{name: "a refusal of a named owner not taken is the busy refusal with the reason appended",
			pod: podtest.GitLab("ci", "g").Running("build").Annotate(runnerpod.CreatedBy, "system:serviceaccount:ci:gitlab-runner").Obj(), requester: "system:serviceaccount:ci:gitlab-runner", op: Eviction, rule: runnerpod.RuleBusy,
			msg: []string{"removing the pod now would lose that job", "; system:serviceaccount:ci:gitlab-runner is named as the job's owner"}},
		{name: "a reaper not named as the owner gets no owner reason",
			pod: podtest.GitLab("ci", "g").Running("build").Annotate(runnerpod.CreatedBy, "system:serviceaccount:ci:gitlab-runner").Obj(), requester: reaper, rule: runnerpod.RuleBusy},
		{name: "someone other than the creator deleting a GitLab build pod is refused",
			pod: podtest.GitLab("ci", "g").Running("build").Annotate(runnerpod.CreatedBy, "system:serviceaccount:gitlab:runner").Obj(), requester: reaper, rule: runnerpod.RuleBusy},
		{name: "the creator of a generic runner is not its job's owner",
			pod: podtest.Runner("ci", "r").Running("runner").Annotate(runnerpod.CreatedBy, reaper).Obj(), requester: reaper, rule: runnerpod.RuleBusy},
		{name: "an empty requester never matches an empty created-by",
			pod: podtest.GitLab("ci", "g").Running("build").Annotate(runnerpod.CreatedBy, "").Obj(), requester: "", rule: runnerpod.RuleBusy},
		{name: "the namespace controller is exempt",
			pod: podtest.Runner("ci", "r").Running("runner").Obj(), requester: config.NamespaceController, rule: runnerpod.RuleExempt, allowed: true},
		{name: "the pod garbage collector is exempt",
			pod: podtest.Runner("ci", "r").Running("runner").Obj(), requester: config.PodGC, rule: runnerpod.RuleExempt, allowed: true},
		{name: "taint-based eviction is exempt",
			pod: podtest.Runner("ci", "r").Running("runner").Obj(), requester: config.TaintEviction, op: Eviction, rule: runnerpod.RuleExempt, allowed: true},
		{name: "the override annotation with a reason releases a busy runner",
			pod: podtest.Runner("ci", "r").Running("runner").Annotate(runnerpod.AllowDelete, "drain for kernel upgrade").Obj(), requester: reaper, rule: runnerpod.RuleOverride, allowed: true, msg: []string{"drain for kernel upgrade"}},
		{name: "an override annotation without a reason does not override",
			pod: podtest.Runner("ci", "r").Running("runner").Annotate(runnerpod.AllowDelete, "  ").Obj(), requester: reaper, rule: runnerpod.RuleBusy, msg: []string{"set but empty"}},
		{name: "a busy runner is refused with what runs, for how long and how to override",
			pod: podtest.Runner("ci", "r").Running("runner").Obj(), requester: reaper, rule: runnerpod.RuleBusy,
			msg: []string{`runner container "runner" of pod ci/r (generic)`, "running for 41m (since 2026-11-01T12:00:00Z) and", "removing the pod now would lose that job", "its protection expires in 6d23h (preset cap 7d)",
				`let the job finish, or, to drain it deliberately, have someone granted the verb "override" on runners.runnerguard.io in ci (the ClusterRole runnerguard-override in a default install) first run: kubectl annotate pod -n ci r runnerguard.io/allow-delete="<reason>"`}},
		{name: "an eviction of a busy runner says it will succeed after the job",
			pod: podtest.Runner("ci", "r").Running("runner").Obj(), op: Eviction, requester: reaper, rule: runnerpod.RuleBusy, msg: []string{"eviction will succeed once the job ends"}},
		{name: "one running runner of two makes the pod busy",
			pod: twoRunners().Terminated("runner", 0, "Completed").Running("runner-2").Obj(), requester: reaper, cfg: twoRunnerCfg(), rule: runnerpod.RuleBusy, msg: []string{`"runner-2"`}},
		{name: "a runner that has run past its preset's cap may go, saying how long it ran",
			pod: podtest.Runner("ci", "r").RunningSince("runner", weekAgo.Add(-time.Second)).Obj(), requester: reaper, rule: runnerpod.RuleProtectionExpired, allowed: true,
			msg: []string{"protection expired", `runner "runner" has run for 7d, past the 7d cap of preset generic`}},
		{name: "a runner at exactly its cap is still protected",
			pod: podtest.Runner("ci", "r").RunningSince("runner", weekAgo).Obj(), requester: reaper, rule: runnerpod.RuleBusy},
		{name: "an eviction past the cap is allowed too",
			pod: podtest.Runner("ci", "r").RunningSince("runner", weekAgo.Add(-time.Hour)).Obj(), op: Eviction, requester: reaper, rule: runnerpod.RuleProtectionExpired, allowed: true},
		{name: "the cap is per preset: a GitLab job may run a month",
			pod: podtest.GitLab("ci", "g").RunningSince("build", weekAgo.Add(-time.Hour)).Obj(), requester: reaper, rule: runnerpod.RuleBusy},
		{name: "a pod past its own activeDeadlineSeconds is protected no longer, a month's cap notwithstanding",
			pod: podtest.GitLab("ci", "g").RunningSince("build", now.Add(-690*time.Second)).ActiveDeadline(601, now.Add(-700*time.Second)).Obj(), requester: reaper, rule: runnerpod.RuleProtectionExpired, allowed: true,
			msg: []string{"the pod's own deadline (activeDeadlineSeconds 601 from its start at", "passed at"}},
		{name: "a pod at its deadline is protected no longer",
			pod: podtest.GitLab("ci", "g").Running("build").ActiveDeadline(601, now.Add(-601*time.Second)).Obj(), requester: reaper, rule: runnerpod.RuleProtectionExpired, allowed: true},
		{name: "a refusal before the pod's deadline says the protection ends with it",
			pod: podtest.GitLab("ci", "g").RunningSince("build", now.Add(-490*time.Second)).ActiveDeadline(601, now.Add(-500*time.Second)).Obj(), requester: reaper, rule: runnerpod.RuleBusy,
			msg: []string{"its protection expires in 101s (the pod's activeDeadlineSeconds 601)"}},
		{name: "a deadline later than the preset's cap leaves the cap to decide",
			pod: podtest.Runner("ci", "r").RunningSince("runner", now.Add(-time.Hour)).ActiveDeadline(30*24*3600, now.Add(-time.Hour)).Obj(), requester: reaper, rule: runnerpod.RuleBusy,
			msg: []string{"its protection expires in 6d23h (preset cap 7d)"}},
		{name: "a deadline without the pod's start time is not counted",
			pod: func() *corev1.Pod {
				p := podtest.GitLab("ci", "g").Running("build").ActiveDeadline(1, podtest.Start).Obj()
				p.Status.StartTime = nil
				return p
			}(), requester: reaper, rule: runnerpod.RuleBusy},
		{name: "a configured cap replaces the default",
			pod: podtest.Runner("ci", "r").RunningSince("runner", now.Add(-2*time.Hour)).Obj(), cfg: capped(generic.Name, time.Hour), requester: reaper, rule: runnerpod.RuleProtectionExpired, allowed: true,
			msg: []string{"has run for 120m, past the 60m cap"}},
		{name: "an idle runner past its cap is idle first",
			pod: podtest.ARCScaleSet("ci", "r").RunningSince("runner", weekAgo.Add(-time.Hour)).Obj(), job: JobNone, rule: runnerpod.RuleIdle, allowed: true},
		{name: "an override past the cap is an override, logged with its reason",
			pod: podtest.Runner("ci", "r").RunningSince("runner", weekAgo.Add(-time.Hour)).Annotate(runnerpod.AllowDelete, "drain").Obj(), requester: reaper, rule: runnerpod.RuleOverride, allowed: true},
		{name: "an ARC runner whose EphemeralRunner cannot be read is released past its cap",
			pod: podtest.ARCScaleSet("ci", "r").RunningSince("runner", weekAgo.Add(-time.Hour)).Obj(), job: JobUnreadable, requester: reaper, rule: runnerpod.RuleProtectionExpired, allowed: true},
		{name: "a zombie's eviction passes for anyone, saying what it is and since when",
			pod: zombiePod(), job: JobAssigned, op: Eviction, requester: reaper, rule: runnerpod.RuleZombie, allowed: true,
			msg: []string{`runner "runner" is a zombie, spent-config since 2026-11-01T12:00:00Z (41m ago): its EphemeralRunner's job was assigned before this pod was created`, "its eviction, which lets its node go"}},
		{name: "a zombie's delete by its fleet's controller passes",
			pod: zombiePod(), job: JobAssigned, requester: arc, cfg: zombieCfg(arc, ""), rule: runnerpod.RuleZombie, allowed: true,
			msg: []string{"a delete by " + arc + ", its fleet's controller or a reaper the operator allows (guard.zombieReapers)"}},
		{name: "a zombie's delete by a reaper the operator allows passes",
			pod: zombiePod(), job: JobAssigned, requester: reaper, cfg: zombieCfg("", reaper), rule: runnerpod.RuleZombie, allowed: true},
		{name: "a zombie's delete by anyone else is refused, saying who may end it",
			pod: zombiePod(), job: JobAssigned, requester: reaper, rule: runnerpod.RuleBusy,
			msg: []string{"it is a zombie (spent-config since 2026-11-01T12:00:00Z: its EphemeralRunner's job", "which its eviction, its fleet's controllers (presets.arc-scale-set.controllerPrincipals) or a reaper named in guard.zombieReapers may end"}},
		{name: "a busy runner the leader named no zombie, quiet for an hour, is refused to the allowed reaper",
			pod: podtest.ARCScaleSet("ci", "r").RunningSince("runner", now.Add(-time.Hour)).Obj(), job: JobAssigned, requester: reaper, cfg: zombieCfg("", reaper), rule: runnerpod.RuleBusy},
		{name: "a busy runner's eviction, no zombie, is refused",
			pod: podtest.ARCScaleSet("ci", "r").Running("runner").Obj(), job: JobAssigned, op: Eviction, requester: reaper, rule: runnerpod.RuleBusy},
		{name: "a zombie mark that does not parse names no zombie",
			pod: podtest.ARCScaleSet("ci", "r").Running("runner").Annotate(runnerpod.ZombieAnnotation, "spent-config yesterday").Obj(), job: JobAssigned, op: Eviction, requester: reaper, rule: runnerpod.RuleBusy},
		{name: "a zombie whose fleet says its job is over is over first",
			pod: zombiePod(), job: JobOver, requester: reaper, rule: runnerpod.RuleJobOver, allowed: true},
		{name: "a pod with init containers only is not a runner pod",
			pod: initOnly(), rule: runnerpod.RuleNotRunnerPod, allowed: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			if tc.cfg != nil {
				c = *tc.cfg
			}
			op := tc.op
			if op == "" {
				op = Delete
			}
			mode := tc.mode
			if mode == "" {
				mode = config.ModeEnforce
			}
			runsJob := func() bool { return slices.Contains(tc.jobPods, tc.boundPod) }
			nodeReads := 0
			lookupNode := func() *corev1.Node { nodeReads++; return tc.node }
			f := Facts{Pod: tc.pod, Operation: op, Requester: tc.requester, RequesterPod: tc.boundPod, RequesterCredential: tc.credential, RequesterPodRunsJob: runsJob, Job: tc.job, OwnerDeleting: tc.deleting, LookupNode: lookupNode, Now: now, Mode: mode}
			d := Decide(f, c)
			if d.Rule == runnerpod.RuleBusy || d.Rule == runnerpod.RuleNodeDrain || d.Rule == runnerpod.RuleProtectionExpired {
				assert.Equal(t, 1, nodeReads, "the node is read once for a busy runner")
			} else {
				assert.Zero(t, nodeReads, "the node is read only for a busy runner")
			}
			// The pod as the guard decodes it from a review (decodePod) is
			// decided as the whole pod decoded from the same bytes.
			whole, got := decodedBothWays(t, tc.pod)
			f.Pod = whole
			want := Decide(f, c)
			f.Pod = got
			assert.Equal(t, want, Decide(f, c), "the pod as the guard decodes it from a review is decided as the whole pod")
			assert.Equal(t, tc.rule, d.Rule, d.Message)
			assert.Equal(t, tc.allowed, d.Allowed)
			assert.Equal(t, tc.warned, d.Warned)
			for _, m := range tc.msg {
				assert.Contains(t, d.Message, m)
			}
			if tc.requester == reaper || (tc.allowed && !tc.warned) {
				assert.Empty(t, d.OwnerNotTaken, "said only of a requester named as the owner and refused")
			}
			if tc.rule == runnerpod.RuleOwnerUnknown {
				assert.Empty(t, d.OwnerUnshown, "said only of a requester not shown to be the owner")
			}
		})
	}
}

// zombiePod is an ARC runner the leader named a zombie of a spent
// configuration since its start.
func zombiePod() *corev1.Pod {
	z := runnerpod.Zombie{Kind: arcscaleset.SpentConfig, Since: podtest.Start}
	return podtest.ARCScaleSet("ci", "r").Running("runner").Annotate(runnerpod.ZombieAnnotation, z.Value()).Obj()
}

// zombieCfg names ARC's controller and a zombie reaper ("" for none).
func zombieCfg(controller, reaper string) *config.Config {
	c := configtest.Enforcing()
	for i := range c.Presets {
		if c.Presets[i].Name == arcscaleset.Name && controller != "" {
			c.Presets[i].ControllerPrincipals = []string{controller}
		}
	}
	if reaper != "" {
		c.Guard.ZombieReapers = []string{reaper}
	}
	return &c
}

func disabled(n runnerpod.PresetName) *config.Config {
	c := configtest.Enforcing()
	for i := range c.Presets {
		if c.Presets[i].Name == n {
			c.Presets[i].Enabled = false
		}
	}
	return &c
}

func withOwner(n runnerpod.PresetName, owner string) config.Config {
	c := configtest.Enforcing()
	for i := range c.Presets {
		if c.Presets[i].Name == n {
			c.Presets[i].OwnerPrincipals = []string{owner}
		}
	}
	return c
}

func inRunnerNamespace(c config.Config) *config.Config {
	for i := range c.Presets {
		if c.Presets[i].Name == gitlab.Name {
			c.Presets[i].OwnerInRunnerNamespace = true
		}
	}
	return &c
}

func capped(n runnerpod.PresetName, d time.Duration) *config.Config {
	c := configtest.Enforcing()
	for i := range c.Presets {
		if c.Presets[i].Name == n {
			c.Presets[i].MaxProtected.Duration = d
		}
	}
	return &c
}

func twoRunnerCfg() *config.Config {
	c := configtest.Enforcing()
	for i := range c.Presets {
		if c.Presets[i].Name == generic.Name {
			c.Presets[i].RunnerContainers = []string{"runner", "runner-2"}
		}
	}
	return &c
}

func twoRunners() *podtest.Wrapper {
	w := podtest.Runner("ci", "r2")
	w.Spec.Containers = append(w.Spec.Containers, corev1.Container{Name: "runner-2", Image: "x"})
	return w
}

func initOnly() *corev1.Pod {
	w := podtest.Plain("ci", "i")
	w.Spec.InitContainers = []corev1.Container{{Name: "runner", Image: "x"}}
	w.Spec.Containers = nil
	return w.Obj()
}

func TestTheJobIsLookedUpOnlyWhenItDecides(t *testing.T) {
	cfg := configtest.Enforcing()
	now := podtest.Start.Add(time.Minute)
	cases := map[string]struct {
		pod    *corev1.Pod
		looked bool
		rule   runnerpod.Rule
	}{
		"a running ARC runner's job decides":      {pod: podtest.ARCScaleSet("ci", "r").Running("runner").Obj(), looked: true, rule: runnerpod.RuleIdle},
		"an ended runner needs no lookup":         {pod: podtest.ARCScaleSet("ci", "r").Terminated("runner", 0, "Completed").Obj(), rule: runnerpod.RuleRunnerTerminated},
		"a terminating pod needs no lookup":       {pod: podtest.ARCScaleSet("ci", "r").Running("runner").Terminating(podtest.Start).Obj(), rule: runnerpod.RuleTerminating},
		"a generic runner has no EphemeralRunner": {pod: podtest.Runner("ci", "r").Running("runner").Obj(), rule: runnerpod.RuleBusy},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			looked := false
			d := Decide(Facts{Pod: tc.pod, Operation: Delete, Requester: reaper, Now: now, Mode: config.ModeEnforce,
				LookupJob: func(runnerpod.Runner) JobRecord { looked = true; return JobRecord{Signal: JobNone} }}, cfg)
			assert.Equal(t, tc.looked, looked)
			assert.Equal(t, tc.rule, d.Rule)
		})
	}
}

func TestRequesterClass(t *testing.T) {
	for user, want := range map[string]string{
		"system:serviceaccount:ci:reaper": "serviceaccount",
		"system:node:node-1":              "node",
		"system:kube-controller-manager":  "system",
		"alice@example.com":               "user",
		"":                                "user",
		"system:serviceaccount:kube-system:namespace-controller": "serviceaccount",
	} {
		assert.Equal(t, want, requesterClass(user), user)
	}
}

func TestModeFor(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		def    config.Mode
		want   config.Mode
	}{
		{nil, config.ModeEnforce, config.ModeEnforce},
		{map[string]string{runnerpod.ModeLabel: "warn"}, config.ModeEnforce, config.ModeWarn},
		{map[string]string{runnerpod.ModeLabel: "enforce"}, config.ModeWarn, config.ModeEnforce},
		{map[string]string{runnerpod.ModeLabel: "audit"}, config.ModeWarn, config.ModeWarn},
	} {
		assert.Equal(t, tc.want, config.ModeFor(tc.labels, tc.def), "%v", tc.labels)
	}
}

// TestARefusalSaysWhenTheDrainCanGoOn: the 429's message and the refusal's
// Event say since when the runner has run, when its protection ends (an
// absolute time), and the job where the fleet names one.
func TestARefusalSaysWhenTheDrainCanGoOn(t *testing.T) {
	now := podtest.Start.Add(41*time.Minute + 12*time.Second)
	arcJob := &v1alpha1.Job{ID: "31885502817", RequestID: "41002", Run: "11802293411", Project: "acme/app", Name: "build (linux)", Source: "EphemeralRunner/r"}
	cases := []struct {
		name     string
		pod      *corev1.Pod
		record   JobRecord
		msg      []string
		event    string
		notInMsg string
	}{
		{name: "ARC: the job, its workflow run, name and repository from the EphemeralRunner",
			pod:    podtest.ARCScaleSet("ci", "r").Running("runner").Obj(),
			record: JobRecord{Signal: JobAssigned, Job: arcJob},
			msg: []string{`has been running for 41m (since 2026-11-01T12:00:00Z) with a job assigned (job "31885502817", workflow run "11802293411", name "build (linux)", project "acme/app")`,
				"its protection expires in 6d23h (preset cap 7d), at 2026-11-08T12:00:00Z"},
			event: ` (running since 2026-11-01T12:00:00Z; job "31885502817", workflow run "11802293411", name "build (linux)", project "acme/app"; protection ends at 2026-11-08T12:00:00Z)`},
		{name: "ARC before jobId: the job request id stands for it",
			pod:    podtest.ARCScaleSet("ci", "r").Running("runner").Obj(),
			record: JobRecord{Signal: JobAssigned, Job: &v1alpha1.Job{RequestID: "41002"}},
			msg:    []string{`with a job assigned (job "41002")`},
			event:  ` (running since 2026-11-01T12:00:00Z; job "41002"; protection ends at 2026-11-08T12:00:00Z)`},
		{name: "GitLab: the job and project from the pod's own keys; the pod's deadline ends protection first",
			pod: podtest.GitLab("ci", "g").RunningSince("build", now.Add(-490*time.Second)).ActiveDeadline(601, now.Add(-500*time.Second)).
				Annotate(gitlab.JobIDAnnotation, "4711").Annotate(runnerpod.CreatedBy, "system:serviceaccount:gitlab:manager").Label(gitlab.ProjectIDLabel, "42").Obj(),
			msg:   []string{`has been running for 8m10s (since 2026-11-01T12:33:02Z) and is taken to be busy with a job (job "4711", project "42")`, "its protection expires in 101s (the pod's activeDeadlineSeconds 601), at 2026-11-01T12:42:53Z"},
			event: ` (running since 2026-11-01T12:33:02Z; job "4711", project "42"; protection ends at 2026-11-01T12:42:53Z)`},
		{name: "a generic runner names no job",
			pod:      podtest.Runner("ci", "r").Running("runner").Obj(),
			msg:      []string{"running for 41m (since 2026-11-01T12:00:00Z) and is taken to be busy with a job; removing"},
			event:    ` (running since 2026-11-01T12:00:00Z; protection ends at 2026-11-08T12:00:00Z)`,
			notInMsg: "job \""},
		{name: "a runner whose start the kubelet has not reported: nothing to say of time",
			pod: func() *corev1.Pod {
				p := podtest.Runner("ci", "r").Running("runner").Obj()
				p.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.Time{}
				return p
			}(),
			msg:      []string{`of pod ci/r (generic) is running and is taken to be busy`},
			notInMsg: "protection expires"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := Facts{Pod: tc.pod, Operation: Eviction, Requester: reaper, Now: now, Mode: config.ModeEnforce,
				LookupJob: func(runnerpod.Runner) JobRecord { return tc.record }}
			d := Decide(f, configtest.Enforcing())
			require.Equal(t, runnerpod.RuleBusy, d.Rule, d.Message)
			for _, m := range tc.msg {
				assert.Contains(t, d.Message, m)
			}
			if tc.notInMsg != "" {
				assert.NotContains(t, d.Message, tc.notInMsg)
			}
			f.Job, f.JobNamed = tc.record.Signal, tc.record.Job
			assert.Equal(t, tc.event, refusalPlan(f, d))
		})
	}
}

// TestDecideAndProtectedAgree: the guard refuses a requester without
// standing (not the job's owner, not exempt) exactly when presets.Protected,
// which the leader's marks follow, says the pod is busy.
func TestDecideAndProtectedAgree(t *testing.T) {
	now := podtest.Start.Add(41 * time.Minute)
	mgr := "system:serviceaccount:gitlab:manager"
	pods := []*corev1.Pod{
		podtest.Runner("ci", "r").Running("runner").Obj(),
		podtest.Runner("ci", "r").Obj(),
		podtest.Runner("ci", "r").Terminated("runner", 0, "Completed").Obj(),
		podtest.Runner("ci", "r").Running("runner").Terminating(now).Obj(),
		podtest.Runner("ci", "r").Running("runner").Annotate(runnerpod.AllowDelete, "drain").Obj(),
		podtest.Runner("ci", "r").RunningSince("runner", now.Add(-169*time.Hour)).Obj(),
		podtest.ARCScaleSet("ci", "r").Running("runner").Obj(),
		podtest.ARCLegacy("ci", "r").Running("runner").Obj(),
		podtest.ARCLegacy("ci", "r").Running("runner").Annotate(arclegacy.Unregistered, "t").Obj(),
		podtest.ARCWorkflow("ci", "r").Running("job").Annotate(runnerpod.CreatedBy, mgr).Obj(),
		podtest.GitLab("ci", "g").Running("build").Annotate(runnerpod.CreatedBy, mgr).Obj(),
		podtest.GitLab("ci", "g").Running("build").Annotate(runnerpod.CreatedBy, mgr).ActiveDeadline(600, podtest.Start).Obj(),
	}
	cfg := configtest.Enforcing()
	for i, pod := range pods {
		for _, job := range []JobSignal{JobNotRead, JobAssigned, JobNone, JobUnreadable, JobOver} {
			d := Decide(Facts{Pod: pod, Operation: Eviction, Requester: reaper, Job: job, Now: now, Mode: config.ModeEnforce}, cfg)
			r, ok := presets.Match(pod, cfg.Presets)
			require.True(t, ok)
			p := presets.Protected(pod, r, job, now)
			assert.Equal(t, d.Rule == runnerpod.RuleBusy, p.Busy, "pod %d (%s), job %d: rule %s", i, r.Preset.Name, job, d.Rule)
		}
	}
}

// gitlabCreatedWith is a running GitLab build pod in namespace ci created
// by creator with credential.
func gitlabCreatedWith(creator, credential string) *corev1.Pod {
	return podtest.GitLab("ci", "g").Running("build").Annotate(runnerpod.CreatedBy, creator).Annotate(runnerpod.CreatedWith, credential).Obj()
}

// drainNode is a node carrying a drain deadline at at, set by by.
func drainNode(at time.Time, by string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-7", Annotations: map[string]string{
		runnerpod.DrainDeadline: at.UTC().Format(time.RFC3339), runnerpod.DrainDeadlineBy: by}}}
}
