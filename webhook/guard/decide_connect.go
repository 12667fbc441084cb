package guard

import (
	"fmt"
	"slices"
	"strings"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// The connections the guard judges: a CONNECT to a pod's exec or attach
// subresource. A process started in, or attached to, the runner container
// reaches the job's processes and can end them.
const (
	Exec   Operation = "exec"
	Attach Operation = "attach"
)

// DecideConnect judges an exec or attach into f.Pod's container (""
// when the request names none). Into a runner container it is the
// decision table of a delete: the job's owner (GitLab's manager runs every
// job script through attach or exec into the build container, ARC's
// kubernetes-mode runner through exec into its workflow pod's job
// container) and the exempt principals are allowed, and so is anyone once
// an operator has set the override on the pod; a busy runner is refused to
// everyone else (principals granted the override are never sent here: the
// webhook's matchConditions let them through at the API server).
func DecideConnect(f Facts, container string, cfg config.Config) Decision {
	runner, ok := runnerpod.Match(f.Pod, cfg.Presets)
	if !ok {
		return Decision{Allowed: true, Rule: runnerpod.RuleNotRunnerPod, Message: "not a runner pod"}
	}
	if !targetsRunner(f, container, runner.Containers) {
		return Decision{Allowed: true, Rule: runnerpod.RuleOtherContainer, Runner: runner,
			Message: fmt.Sprintf("container %q is not a runner container", container)}
	}
	d := Decide(f, cfg)
	if d.Rule == runnerpod.RuleBusy {
		d.Message = connectBusyMessage(f, d)
		if d.OwnerNotTaken != "" {
			d.Message += "; " + d.OwnerNotTaken
		}
		if d.Warned {
			d.Message = "runnerguard (warn mode) would refuse this: " + strings.TrimPrefix(d.Message, "runnerguard: ")
		}
	}
	return d
}

// targetsRunner reports whether the connection reaches a runner container.
// Without a container name the API server picks the pod's only container,
// and refuses a pod with several: judged as the runner either way.
func targetsRunner(f Facts, container string, runners []string) bool {
	if container == "" {
		return true
	}
	return slices.Contains(runners, container)
}
