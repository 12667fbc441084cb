package presets

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// leaseEnds is until, or the runner's lease when it lapses sooner.
func leaseEnds(pod *corev1.Pod, r runnerpod.Runner, until time.Time) time.Time {
	if at, ok := Lease(pod, r); ok && (until.IsZero() || at.Before(until)) {
		return at
	}
	return until
}

// Protection is what the guard's pod-level rules say of a runner pod: is
// it protected from every requester the guard does not exempt, and until
// when.
type Protection struct {
	// Busy: the guard refuses its delete and eviction (in enforce mode).
	Busy bool
	// Until is when the protection ends if the runner is still busy then
	// (zero: not known).
	Until time.Time
}

// Protected applies the guard's rules that depend on the pod alone, in
// the guard's order: its state, the fleet's job signal (job as read from
// the fleet's record; JobNotRead for fleets without one), a zombie (whose
// eviction the guard lets through for anyone), the override,
// the cap and the pod's deadline. The guard's rules that depend on the
// requester (the job's owner, exempt principals) are not among them: they
// free a pod for one requester, not for an autoscaler.
func Protected(pod *corev1.Pod, r runnerpod.Runner, job runnerpod.JobSignal, now time.Time) Protection {
	p, _ := ProtectedWhy(pod, r, job, now)
	return p
}

// ProtectedWhy is Protected and, for a runner it does not protect, why
// not, as a person reads it: the eviction responder tells a drainer.
func ProtectedWhy(pod *corev1.Pod, r runnerpod.Runner, job runnerpod.JobSignal, now time.Time) (Protection, string) {
	s := runnerpod.RunnerStatus(pod, r.Containers)
	if free, why := runnerpod.FreeByState(pod, s); free != "" {
		return Protection{}, why
	}
	if free, why := FreeByJob(pod, r, job, now); free != "" {
		return Protection{}, why
	}
	if z, ok := runnerpod.ZombieOf(pod); ok {
		// Its eviction passes for anyone (rule zombie), so its node can go.
		return Protection{}, fmt.Sprintf("it is a zombie (%s)", z.Kind)
	}
	if reason, ok := runnerpod.Overridden(pod); ok {
		return Protection{}, fmt.Sprintf("the override %s is set (%q)", runnerpod.AllowDelete, reason)
	}
	t := runnerpod.TermOf(pod, s, r.Preset, now)
	if t.Expired == runnerpod.ExpiredCap {
		return Protection{}, "its protection expired: it has run past its preset's cap of " + duration.HumanDuration(r.Preset.MaxProtected.Duration)
	}
	if t.Expired != "" {
		return Protection{}, "its protection expired at the pod's own deadline (activeDeadlineSeconds)"
	}
	return Protection{Busy: true, Until: leaseEnds(pod, r, t.Ends)}, ""
}

// ZombieOf is the fleet's word on whether the runner pod is a zombie
// (fleet.ZombieOf), rec being the fleet's record of its job where it keeps
// one.
func ZombieOf(pod *corev1.Pod, r runnerpod.Runner, rec *unstructured.Unstructured) (runnerpod.Zombie, bool) {
	return fleet.ZombieOf(Of(r), rec, pod)
}

// ZombieMeans is what a zombie of that kind means in the runner's fleet.
func ZombieMeans(r runnerpod.Runner, kind string) string {
	return Of(r).Traits().Zombies[kind]
}

// ZombieNote is what the leader's Event and `why` say of a zombie.
func ZombieNote(r runnerpod.Runner, z runnerpod.Zombie) string {
	return "a zombie, " + z.Kind + " since " + z.Since.UTC().Format(time.RFC3339) + ": " + ZombieMeans(r, z.Kind) +
		"; runnerguard no longer holds it: its eviction passes, and its fleet's controllers or guard.zombieReapers may delete it"
}
