package arcscaleset

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// SpentConfig is the zombie of a pod ARC created for an EphemeralRunner
// whose job had already been given to an earlier pod of it. The runner
// registers with the EphemeralRunner's just-in-time configuration, which
// the service takes once and for one job; ARC re-creates a vanished pod
// (a spot node's eviction) with that same configuration and never clears
// the job from the status (ARC issues 4588 and 4091). The new runner can
// never run that job or any other, yet its EphemeralRunner says busy.
const SpentConfig = "spent-config"

// zombies are the kinds Zombie names, with what each means.
var zombies = map[string]string{
	runnerpod.JobOverZombie: "GitHub says its job completed, yet its runner still runs: ARC keeps a job on the EphemeralRunner after it completed (actions-runner-controller issue 4603), and an ephemeral runner takes no second job (delete its EphemeralRunner to end it)",
	SpentConfig:             "its EphemeralRunner's job was assigned before this pod was created, so it went to an earlier pod: ARC re-created the runner with the one-job configuration that pod spent, and this runner can never run a job (delete its EphemeralRunner to end it: ARC re-creates a deleted pod the same way)",
}

// jobFields are the status fields ARC's listener writes, once, when the
// service assigns the runner its job (scaler.HandleJobStarted).
var jobFields = []string{"jobRequestId", "jobId"}

// Zombie is SpentConfig: er names a job, first written (as the API
// server dates the listener's write, fleet.WrittenAt) before the pod was
// created, dated by the API server. A job is given only to a runner that
// is up, so a pod always exists before its own job, by at least the time
// its runner takes to start, register and take the job: one created after
// its EphemeralRunner's job was given holds a job it never had. The API
// servers of a control plane keep their clocks far closer than that, and
// both times are whole seconds, so the same second says nothing. It is one
// since its creation. A job quiet for hours, or one whose write is not
// dated, says nothing.
func (Fleet) Zombie(pod *corev1.Pod, er *unstructured.Unstructured) (runnerpod.Zombie, bool) {
	if er == nil {
		return runnerpod.Zombie{}, false
	}
	if signal, _ := JobSignal(er, er.GetUID()); signal != runnerpod.JobAssigned {
		return runnerpod.Zombie{}, false
	}
	given, ok := fleet.WrittenAt(er, jobFields...)
	if !ok || !pod.CreationTimestamp.After(given) {
		return runnerpod.Zombie{}, false
	}
	return runnerpod.Zombie{Kind: SpentConfig, Since: pod.CreationTimestamp.Time}, true
}
