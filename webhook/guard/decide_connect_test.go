package guard

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/fleet/gitlab"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

func TestDecideConnect(t *testing.T) {
	const manager = "system:serviceaccount:gitlab:manager"
	cfg := withOwner(gitlab.Name, manager)
	busyGitLab := func() *podtest.Wrapper { return podtest.GitLab("ci", "g").Running("build").Running("helper") }
	cases := []struct {
		name      string
		pod       *corev1.Pod
		op        Operation
		container string
		requester string
		boundPod  string
		// credential is the request's credential id (its token's JTI).
		credential string
		job        JobSignal
		mode       config.Mode
		rule       runnerpod.Rule
		allowed    bool
		msg        []string
	}{
		{name: "a reaper's exec into a busy runner is refused, saying who may",
			pod: podtest.Runner("ci", "r").Running("runner").Obj(), op: Exec, container: "runner", requester: reaper,
			rule: runnerpod.RuleBusy, msg: []string{`refused exec into runner container "runner" of pod ci/r (generic)`, "only the job's owner", runnerpod.AllowDelete}},
		{name: "an attach is judged as an exec",
			pod: podtest.Runner("ci", "r").Running("runner").Obj(), op: Attach, container: "runner", requester: reaper,
			rule: runnerpod.RuleBusy, msg: []string{"refused attach into runner container"}},
		{name: "no container named is judged as the runner",
			pod: podtest.Runner("ci", "r").Running("runner").Obj(), op: Exec, requester: reaper, rule: runnerpod.RuleBusy},
		{name: "GitLab's manager runs the job's script through attach into the build container",
			pod: busyGitLab().Obj(), op: Attach, container: "build", requester: manager, rule: runnerpod.RuleJobOwner, allowed: true},
		{name: "the pod's recorded creator is its job's owner",
			pod: busyGitLab().Annotate(runnerpod.CreatedBy, "system:serviceaccount:gitlab:runner").Obj(), op: Exec, container: "build",
			requester: "system:serviceaccount:gitlab:runner", rule: runnerpod.RuleJobOwner, allowed: true},
		{name: "a recorded creator of the pod's own namespace may not enter without the opt-in, saying why",
			pod: busyGitLab().Annotate(runnerpod.CreatedBy, "system:serviceaccount:ci:runner").Obj(), op: Exec, container: "build",
			requester: "system:serviceaccount:ci:runner", rule: runnerpod.RuleBusy, msg: []string{`refused exec into runner container "build"`, "which anyone granted edit in ci can impersonate", "ownerInRunnerNamespace"}},
		{name: "GitLab's manager in the build pods' namespace, outside the cluster, attaches with the token it created the pod with",
			pod: busyGitLab().Annotate(runnerpod.CreatedBy, "system:serviceaccount:ci:runner").Annotate(runnerpod.CreatedWith, "JTI=manager").Obj(), op: Attach, container: "build",
			requester: "system:serviceaccount:ci:runner", credential: "JTI=manager", rule: runnerpod.RuleJobOwner, allowed: true},
		{name: "a token minted anew for that manager may not exec, saying what to set",
			pod: busyGitLab().Annotate(runnerpod.CreatedBy, "system:serviceaccount:ci:runner").Annotate(runnerpod.CreatedWith, "JTI=manager").Obj(), op: Exec, container: "build",
			requester: "system:serviceaccount:ci:runner", credential: "JTI=minted", rule: runnerpod.RuleBusy, msg: []string{"a token minted anew", "kubectl create token", "ownerInRunnerNamespace"}},
		{name: "warn mode lets the fleet's manager in whatever its token, saying enforce would refuse it and why",
			pod: busyGitLab().Annotate(runnerpod.CreatedBy, "system:serviceaccount:ci:runner").Obj(), op: Exec, container: "build", mode: config.ModeWarn,
			requester: "system:serviceaccount:ci:runner", rule: runnerpod.RuleBusy, allowed: true, msg: []string{"(warn mode) would refuse this", "ownerInRunnerNamespace"}},
		{name: "ARC's runner execs into its own workflow pod with its pod's token",
			pod: podtest.ARCWorkflow("ci", "r").Running("job").Annotate(runnerpod.CreatedBy, "system:serviceaccount:ci:runner").Obj(), op: Exec, container: "job",
			requester: "system:serviceaccount:ci:runner", boundPod: "r", rule: runnerpod.RuleJobOwner, allowed: true},
		{name: "another runner's token may not exec into the workflow pod",
			pod: podtest.ARCWorkflow("ci", "r").Running("job").Annotate(runnerpod.CreatedBy, "system:serviceaccount:ci:runner").Obj(), op: Exec, container: "job",
			requester: "system:serviceaccount:ci:runner", boundPod: "r2", rule: runnerpod.RuleBusy, msg: []string{`its token is bound to pod "r2"`}},
		{name: "a reaper's exec into GitLab's build container is refused",
			pod: busyGitLab().Obj(), op: Exec, container: "build", requester: reaper, rule: runnerpod.RuleBusy},
		{name: "a reaper's exec into GitLab's helper container is refused too, naming the container",
			pod: busyGitLab().Obj(), op: Exec, container: "helper", requester: reaper, rule: runnerpod.RuleBusy,
			msg: []string{`refused exec into container "helper" of pod ci/g (gitlab): its runner container "build" is running`}},
		{name: "a reaper's exec into ARC's dind sidecar of a busy runner is refused",
			pod: podtest.ARCScaleSet("ci", "r").Running("runner").Obj(), op: Exec, container: "dind", requester: reaper, job: JobAssigned, rule: runnerpod.RuleBusy,
			msg: []string{`refused exec into container "dind" of pod ci/r (arc-scale-set)`}},
		{name: "a reaper's exec into the vitals sidecar of a busy runner is refused",
			pod: podtest.Runner("ci", "r").Running("runner").Obj(), op: Exec, container: "runnerguard-vitals", requester: reaper, rule: runnerpod.RuleBusy},
		{name: "a reaper's port-forward to a busy runner pod is refused",
			pod: busyGitLab().Obj(), op: PortForward, requester: reaper, rule: runnerpod.RuleBusy,
			msg: []string{"refused portforward to pod ci/g (gitlab)", "may portforward there"}},
		{name: "a reaper's proxied request to a busy runner pod is refused",
			pod: podtest.Runner("ci", "r").Running("runner").Obj(), op: Proxy, requester: reaper, rule: runnerpod.RuleBusy,
			msg: []string{"refused proxy to pod ci/r (generic)"}},
		{name: "GitLab's manager execs into the helper container, as it does to collect artifacts",
			pod: busyGitLab().Obj(), op: Exec, container: "helper", requester: manager, rule: runnerpod.RuleJobOwner, allowed: true},
		{name: "an idle ARC runner may be port-forwarded to",
			pod: podtest.ARCScaleSet("ci", "r").Running("runner").Obj(), op: PortForward, requester: reaper, job: JobNone, rule: runnerpod.RuleIdle, allowed: true},
		{name: "a GitLab pod whose build container ended may be entered by anyone",
			pod: podtest.GitLab("ci", "g").Terminated("build", 0, "Completed").Running("helper").Obj(), op: Exec, container: "helper", requester: reaper,
			rule: runnerpod.RuleRunnerTerminated, allowed: true},
		{name: "a generic pool has no job owner: its creator is refused too",
			pod: podtest.Runner("ci", "r").Running("runner").Annotate(runnerpod.CreatedBy, "ci-bot").Obj(), op: Exec, container: "runner",
			requester: "ci-bot", rule: runnerpod.RuleBusy},
		{name: "the override on the pod lets anyone in",
			pod: podtest.Runner("ci", "r").Running("runner").Annotate(runnerpod.AllowDelete, "debugging a hung job").Obj(), op: Exec, container: "runner",
			requester: reaper, rule: runnerpod.RuleOverride, allowed: true},
		{name: "an idle ARC runner may be entered",
			pod: podtest.ARCScaleSet("ci", "r").Running("runner").Obj(), op: Exec, container: "runner", requester: reaper, job: JobNone, rule: runnerpod.RuleIdle, allowed: true},
		{name: "a runner not started yet may be entered",
			pod: podtest.Runner("ci", "r").Obj(), op: Exec, container: "runner", requester: reaper, rule: runnerpod.RuleNotStarted, allowed: true},
		{name: "a pod that is not a runner pod is not judged",
			pod: podtest.Plain("ci", "web").Running("app").Obj(), op: Exec, container: "app", requester: reaper, rule: runnerpod.RuleNotRunnerPod, allowed: true},
		{name: "the exempt principals are allowed",
			pod: podtest.Runner("ci", "r").Running("runner").Obj(), op: Exec, container: "runner", requester: config.NamespaceController, rule: runnerpod.RuleExempt, allowed: true},
		{name: "warn mode allows it, saying enforce would refuse it",
			pod: podtest.Runner("ci", "r").Running("runner").Obj(), op: Exec, container: "runner", requester: reaper, mode: config.ModeWarn,
			rule: runnerpod.RuleBusy, allowed: true, msg: []string{"(warn mode) would refuse this: refused exec into runner container"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mode := tc.mode
			if mode == "" {
				mode = config.ModeEnforce
			}
			f := Facts{Pod: tc.pod, Operation: tc.op, Requester: tc.requester, RequesterPod: tc.boundPod, RequesterCredential: tc.credential, Job: tc.job, Now: podtest.Start.Add(5 * time.Minute), Mode: mode}
			d := DecideConnect(f, tc.container, cfg)
			assert.Equal(t, tc.rule, d.Rule)
			assert.Equal(t, tc.allowed, d.Allowed)
			assert.Equal(t, tc.mode == config.ModeWarn && tc.rule == runnerpod.RuleBusy, d.Warned)
			for _, m := range tc.msg {
				assert.Contains(t, d.Message, m)
			}
		})
	}
}
