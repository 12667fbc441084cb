package registration

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
	"github.com/runnerguard/runnerguard/webhook/guard"
)

// The chart's delete webhook's matchConditions restate rules 1 to 5 and 8
// of guard.Decide so that the API server, not the webhook, answers them.
// They are two writings of one decision; this test holds them together in
// the fast tests: a delete the matchConditions keep from the webhook must be one
// Decide allows (else the API server lets through what the guard would
// refuse), and every delete that Decide allows by one of those rules must be
// kept from the webhook (else it costs a webhook call the chart promises it
// does not).
func TestDeleteMatchConditionsAgreeWithDecide(t *testing.T) {
	cfg := configtest.Enforcing()
	env, err := cel.NewEnv(cel.Variable("oldObject", cel.DynType), cel.Variable("request", cel.DynType))
	require.NoError(t, err)
	var programs []cel.Program
	del, err := render(t, cfg, Options{}).Webhook(DeleteWebhook)
	require.NoError(t, err)
	for _, mc := range del.MatchConditions {
		ast, iss := env.Compile(mc.Expression)
		require.NoError(t, iss.Err(), mc.Name)
		prg, err := env.Program(ast)
		require.NoError(t, err, mc.Name)
		programs = append(programs, prg)
	}
	reviewed := func(pod *corev1.Pod, requester string) bool {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
		require.NoError(t, err)
		vars := map[string]any{"oldObject": obj, "request": map[string]any{"userInfo": map[string]any{"username": requester}}}
		for _, prg := range programs {
			out, _, err := prg.Eval(vars)
			require.NoError(t, err)
			if out.Value() != true {
				return false
			}
		}
		return true
	}
	// Rules the API server answers: Decide must never reach the webhook for
	// them.
	atServer := map[runnerpod.Rule]bool{
		runnerpod.RuleTerminating: true, runnerpod.RulePodFinished: true, runnerpod.RuleNotStarted: true,
		runnerpod.RuleRunnerTerminated: true, runnerpod.RuleExempt: true,
	}
	now := podtest.Start.Add(41 * time.Minute)
	builders := map[string]func() *podtest.Wrapper{
		"generic":      func() *podtest.Wrapper { return podtest.Runner("ci", "r") },
		"arc-scaleset": func() *podtest.Wrapper { return podtest.ARCScaleSet("ci", "r") },
		"arc-legacy":   func() *podtest.Wrapper { return podtest.ARCLegacy("ci", "r") },
		"arc-workflow": func() *podtest.Wrapper { return podtest.ARCWorkflow("ci", "r") },
		"gitlab":       func() *podtest.Wrapper { return podtest.GitLab("ci", "g") },
		"plain":        func() *podtest.Wrapper { return podtest.Plain("ci", "p") },
	}
	states := map[string]func(w *podtest.Wrapper, c string) *podtest.Wrapper{
		"running":     func(w *podtest.Wrapper, c string) *podtest.Wrapper { return w.Running(c) },
		"not started": func(w *podtest.Wrapper, c string) *podtest.Wrapper { return w.Waiting(c, "ContainerCreating") },
		"terminated":  func(w *podtest.Wrapper, c string) *podtest.Wrapper { return w.Terminated(c, 0, "Completed") },
		"terminating": func(w *podtest.Wrapper, c string) *podtest.Wrapper { return w.Running(c).Terminating(podtest.Start) },
		"succeeded": func(w *podtest.Wrapper, c string) *podtest.Wrapper {
			return w.Terminated(c, 0, "Completed").Phase(corev1.PodSucceeded)
		},
		"failed running": func(w *podtest.Wrapper, c string) *podtest.Wrapper { return w.Running(c).Phase(corev1.PodFailed) },
		"no status":      func(w *podtest.Wrapper, _ string) *podtest.Wrapper { return w },
	}
	requesters := append([]string{"system:serviceaccount:ci:reaper", "alice@example.com", ""}, cfg.Guard.ExemptPrincipals...)
	for fleet, build := range builders {
		for state, apply := range states {
			for _, requester := range requesters {
				for _, labelled := range []bool{true, false} {
					pod := build().Obj()
					container := "runner"
					if len(pod.Spec.Containers) > 0 {
						container = pod.Spec.Containers[0].Name
					}
					w := apply(build(), container)
					if labelled {
						w = w.Label(runnerpod.RunnerLabel, "true")
					}
					pod = w.Obj()
					name := fmt.Sprintf("%s %s (labelled %v) deleted by %q", fleet, state, labelled, requester)
					d := guard.Decide(guard.Facts{Pod: pod, Operation: guard.Delete, Requester: requester,
						Job: guard.JobAssigned, Now: now, Mode: config.ModeEnforce}, cfg)
					if !reviewed(pod, requester) {
						require.True(t, d.Allowed, "%s: the API server lets it through unreviewed, but Decide refuses it (%s)", name, d.Rule)
					} else if labelled {
						// An unlabelled runner pod's delete reaches the guard
						// whatever its state, so that it is labelled and its
						// death recorded.
						require.False(t, atServer[d.Rule], "%s: reaches the webhook, though the matchConditions promise to answer rule %s", name, d.Rule)
					}
				}
			}
		}
	}
}
