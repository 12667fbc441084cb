package guard

import (
	"fmt"
	"strings"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// The connections the guard judges: a CONNECT to a pod's exec, attach,
// portforward or proxy subresource. A process started in, or attached to,
// any container of a runner pod reaches the job: the runner's processes
// (a shared process namespace), its docker daemon (ARC's dind, GitLab's
// services) or the work volume they share. A forwarded port or a proxied
// request reaches whatever listens in the pod, a docker daemon without TLS
// among them.
const (
	Exec        Operation = "exec"
	Attach      Operation = "attach"
	PortForward Operation = "portforward"
	Proxy       Operation = "proxy"
)

// DecideConnect judges a connection into f.Pod (container names the
// container an exec or attach enters, "" when the request names none or
// the connection enters no container). Whatever the container, it is the
// decision table of a delete: the job's owner (GitLab's manager runs every
// job script through attach or exec into the build and helper containers,
// ARC's kubernetes-mode runner through exec into its workflow pod's job
// container) and the exempt principals are allowed, and so is anyone once
// an operator has set the override on the pod; a busy runner is refused to
// everyone else (principals granted the override are never sent here: the
// webhook's matchConditions let them through at the API server).
func DecideConnect(f Facts, container string, cfg config.Config) Decision {
	d := Decide(f, cfg)
	if d.Rule == runnerpod.RuleBusy {
		d.Message = connectBusyMessage(f, container, d) + whyNotOwner(d)
		if d.Warned {
			d.Message = "runnerguard (warn mode) would refuse this: " + strings.TrimPrefix(d.Message, "runnerguard: ")
		}
	}
	return d
}

// connectTarget is what the refusal says the connection reaches.
func connectTarget(f Facts, container string, d Decision) string {
	switch {
	case f.Operation == PortForward || f.Operation == Proxy:
		return "to pod"
	case container == "" || container == d.Status.Container.Name:
		return fmt.Sprintf("into runner container %q of pod", d.Status.Container.Name)
	default:
		return fmt.Sprintf("into container %q of pod", container)
	}
}
