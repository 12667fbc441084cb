package notify

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// secrets are the names a death record holds that a public report must
// not show: principals, the node, the ids.
var secrets = map[string]string{
	"uid":                  "5f0c2a51-7d3e-4f5b-9a43-0c1f8e6b2d17",
	"container id":         "containerd://0e1f2a3b4c5d",
	"node":                 "ip-10-0-3-17.eu-west-1.compute.internal",
	"deleter":              "arn:aws:iam::123456789012:role/ci-reaper",
	"starter":              "system:serviceaccount:arc-systems:arc-gha-rs-controller",
	"reason":               "olga@example.com: draining for the kernel patch",
	"refused":              "system:serviceaccount:ci:stale-runner-reaper",
	"creator":              "system:serviceaccount:gitlab-runner:manager",
	"uid in a cgroup path": "5f0c2a51_7d3e_4f5b_9a43_0c1f8e6b2d17",
	"bare container id":    "0e1f2a3b4c5d",
	"eviction request":     "upgrade-olga-ticket-4711",
	"eviction requester":   "platform.example.com/olgas-drainer",
}

// leaky is a death of class c as a real one leaves it, the node's name
// also in what the kubelet and the scheduler wrote.
func leaky(c death.Class, rule runnerpod.Rule) death.Record {
	at := metav1.NewTime(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC))
	exit := int32(137)
	r := arc(c, &v1alpha1.Job{ID: "7311", Run: "900123", Project: "acme/app", Source: "EphemeralRunner/r", CreatedBy: secrets["creator"]})
	r.UID, r.ContainerID, r.Node, r.Container, r.ExitCode = secrets["uid"], secrets["container id"], secrets["node"], "runner", &exit
	r.Deleted, r.DeletedBy, r.StartedBy, r.DeleteRule, r.DeleteReason, r.DeletedAt = true, secrets["deleter"], secrets["starter"], string(rule), secrets["reason"], &at
	r.PodMessage = "The node " + secrets["node"] + " was low on resource: memory."
	r.Message = "oom in /kubepods/burstable/pod" + secrets["uid in a cgroup path"] + ".slice/cri-containerd-" + secrets["bare container id"] + ".scope"
	r.ClassBasis = "node " + secrets["node"] + " reported the container's end"
	r.Disruption = &v1alpha1.Disruption{Reason: "PreemptionByScheduler", Message: "Preempted by pod " + secrets["uid"] + " on node " + secrets["node"]}
	r.NodeState = &v1alpha1.NodeState{Conditions: []string{"Ready=Unknown"}}
	r.EvictionRequest = &v1alpha1.EvictionRequestRef{Names: []string{secrets["eviction request"]}, Requesters: []string{secrets["eviction requester"]}}
	r.Refusals = &v1alpha1.Refusals{Entries: []v1alpha1.Refusal{{Verb: "delete", By: secrets["refused"], Count: 3, First: metav1.NewMicroTime(at.Time), Last: metav1.NewMicroTime(at.Time), Rule: "busy"}}}
	return r
}

// Every class, ended on purpose or not: what reaches a public commit
// (the check run's title and summary, the commit status's description)
// names no principal, node or id, and still names the class and the job;
// where the operator opted in, the names are told.
func TestAPublicReportNamesNoPrincipalNodeOrID(t *testing.T) {
	for _, c := range death.Classes() {
		for _, rule := range []runnerpod.Rule{runnerpod.RuleBusy, runnerpod.RuleOverride, runnerpod.RuleNodeDrain} {
			r := leaky(c, rule)
			d := Delivery{Record: r, Target: Target{Destination: GitHub, LastWords: true}}
			shown := d.Shown()
			told := strings.Join([]string{Title(shown), Summary(shown, true), Description(shown), CheckRunName(d)}, "\n")
			for what, s := range secrets {
				assert.NotContains(t, told, s, "%s/%s: the %s", c, rule, what)
			}
			assert.Contains(t, told, "7311", "%s/%s: the job", c, rule)
			assert.Contains(t, told, Withheld, "%s/%s: says what it withheld", c, rule)
			if !r.Deliberate() {
				assert.Contains(t, told, string(c), "%s/%s: the class", c, rule)
			}

			d.Target.Disclose = true
			disclosed := Summary(d.Shown(), true)
			for _, what := range []string{"uid", "node", "deleter"} {
				assert.Contains(t, disclosed, secrets[what], "%s/%s: opted in, the %s is told", c, rule, what)
			}
		}
	}
}

// A runner ended on purpose (the override, its node's drain deadline) is
// told as information: GitHub's neutral, GitLab's skipped, which leave a
// re-run's result to the re-run; any other death as a failure.
func TestARunnerEndedOnPurposeIsToldAsInformation(t *testing.T) {
	cases := []struct {
		rule               runnerpod.Rule
		deleted            bool
		conclusion, state  string
		titleSays, summary string
	}{
		{runnerpod.RuleOverride, true, "neutral", "skipped", "Job ended on purpose: its runner's pod was deleted with the override", "This is information, not a failure"},
		{runnerpod.RuleNodeDrain, true, "neutral", "skipped", "Job ended on purpose: its runner's node was drained", "This is information, not a failure"},
		{runnerpod.RuleBusy, true, "failure", "failed", "Runner's pod deleted while its job ran (rule busy)", "runnerguard recorded how this job's runner died"},
		{runnerpod.RuleOverride, false, "failure", "failed", "Runner's pod deleted while its job ran", "runnerguard recorded how this job's runner died"},
	}
	for _, c := range cases {
		r := leaky(death.DeletedRunning, c.rule)
		r.Deleted = c.deleted
		shown := Public(r)
		assert.Equal(t, c.conclusion, Conclusion(r), c.rule)
		assert.Equal(t, c.state, string(State(r)), c.rule)
		assert.Contains(t, Title(shown), c.titleSays, c.rule)
		assert.True(t, strings.HasPrefix(Summary(shown, false), c.summary) || strings.Contains(Summary(shown, false), c.summary), c.rule)
	}
}
