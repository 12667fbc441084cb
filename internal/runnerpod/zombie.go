package runnerpod

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ZombieAnnotation is written by the leader (recorder.Marker) on a runner
// pod its fleet's evidence shows alive but unable ever to run a job (a
// zombie, fleet.Fleet.Zombie), with the kind and since when: "KIND SINCE",
// SINCE in RFC 3339. It is written once and never removed: nothing brings a
// zombie back. The guard, the marks, `why` and the death record read it,
// so the evidence is judged once, where the fleet's records are followed;
// the chart's policy lets only runnerguard write it.
const ZombieAnnotation = "runnerguard.io/zombie"

// JobOverZombie is the kind of a runner whose CI service says its job
// ended while the runner still runs, long after it would have ended of
// itself (notify.JobOver): a kind of every fleet whose jobs the leader can
// ask its service about.
const JobOverZombie = "job-over"

// Zombie is a runner that is alive but will never run a job: its kind
// (the fleet's word for the evidence) and since when it has been one.
type Zombie struct {
	Kind  string
	Since time.Time
}

// Value is z as ZombieAnnotation holds it.
func (z Zombie) Value() string { return z.Kind + " " + z.Since.UTC().Format(time.RFC3339) }

// ZombieOf is the zombie the pod's ZombieAnnotation names; false when it
// names none (absent, or a value that does not parse: a pod is taken for a
// zombie only on the leader's clear word).
func ZombieOf(pod *corev1.Pod) (Zombie, bool) {
	kind, since, ok := strings.Cut(pod.Annotations[ZombieAnnotation], " ")
	if !ok || kind == "" {
		return Zombie{}, false
	}
	at, err := time.Parse(time.RFC3339, since)
	if err != nil {
		return Zombie{}, false
	}
	return Zombie{Kind: kind, Since: at}, true
}
