package notify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// A stall's report on the job's commit goes through these phases: told
// while it lasts, then completed once the leader sees it end. A runner
// that dies stalled has its death's report complete it instead.
const (
	// StallUnderWay: the vitals sidecar judges the runner stalled now.
	StallUnderWay = "stalled"
	// StallRecovered: the sidecar's readiness passes again while the pod
	// runs: the job went on.
	StallRecovered = "recovered"
	// StallEnded: the pod ended while stalled and no death report took
	// the report over (a job's normal end is told nowhere).
	StallEnded = "ended"
)

// Stall is a runner's stall at its memory limit as the leader saw it.
type Stall struct {
	// Record names the pod and its job as a death's record would (its
	// namespace, pod, UID, preset and job), so that a stall is told where
	// and only where a death would be; it names no death.
	Record death.Record
	Phase  string
	// Began is when the stall was first seen; At, when Phase was.
	Began, At time.Time
	// Limit is the runner container's memory limit in bytes; 0 when the
	// pod sets none.
	Limit int64
}

// For is how long the stall has lasted, as of At.
func (s Stall) For() time.Duration { return max(0, s.At.Sub(s.Began)) }

// PlanStall is where a stall is told: the job's commit on the service the
// fleet reports to, exactly as a death of the record would be (the same
// opt-in, the same trust in who created the pod), never a sink, and never
// a destination the death would skip.
func PlanStall(r death.Record, cfg config.Reports) []Target {
	if !cfg.Enabled() || !OptedIn(r, cfg) {
		return nil
	}
	var out []Target
	for _, t := range serviceTargets(r, cfg) {
		if t.Skip == "" {
			out = append(out, t)
		}
	}
	return out
}

// StallDelivery is what a sender needs to tell a stall.
type StallDelivery struct {
	Stall  Stall
	Target Target
}

// Shown is the stall as its destination may show it.
func (d StallDelivery) Shown() Stall {
	if !d.Target.Disclose {
		d.Stall.Record = Public(d.Stall.Record)
	}
	return d.Stall
}

// StallExternalID is the external_id of the check run of a stall of the
// pod with uid: the death's report finds the run by it. A hash, since a
// public repository's check runs are readable with their external_id, and
// the pod's UID is withheld there.
func StallExternalID(uid string) string {
	h := sha256.Sum256([]byte("runnerguard stall " + uid))
	return "stall-" + hex.EncodeToString(h[:16])
}

// StallConclusion is the completed stall's check run conclusion: neutral,
// which a required check counts as passing, since a stall the job lived
// through is information, not the job's failure.
const StallConclusion = "neutral"

// StallTitle is the stall in one line.
func StallTitle(s Stall) string {
	limit := "its memory limit"
	if s.Limit > 0 {
		limit = "its " + gib(s.Limit) + " memory limit"
	}
	switch s.Phase {
	case StallRecovered:
		return cut("Runner recovered after "+duration.HumanDuration(s.For())+" stalled at "+limit, maxTitle)
	case StallEnded:
		return cut("Runner ended after "+duration.HumanDuration(s.For())+" stalled at "+limit, maxTitle)
	}
	return cut("Runner stalled at "+limit, maxTitle)
}

// stallAdvice is what a developer can do about a job that stalls.
const stallAdvice = "raise the job's memory limit, or move the job to a bigger lane (a runner label of larger runners); or make the job use less memory (fewer parallel build or test workers)."

// StallSummary is the stall's check run summary: what is happening, how
// long it has, what the developer can do, and where its readings are.
func StallSummary(s Stall) string {
	limit := "its memory limit"
	if s.Limit > 0 {
		limit = "its memory limit of " + gib(s.Limit)
	}
	since := s.Began.UTC().Format(time.RFC3339)
	var head string
	switch s.Phase {
	case StallRecovered:
		head = fmt.Sprintf("This job's runner was stalled at %s for %s, from %s, and recovered: the job went on. A job that stalls runs close to its limit and may be OOM-killed next time.\n\n", limit, duration.HumanDuration(s.For()), since)
	case StallEnded:
		head = fmt.Sprintf("This job's runner was stalled at %s for %s, from %s, until its pod ended. No death of the runner was reported: the job's own result is its outcome.\n\n", limit, duration.HumanDuration(s.For()), since)
	default:
		head = fmt.Sprintf("This job's runner has been stalled at %s for %s, since %s: its memory is full and the kernel reclaims in a loop, so the job makes little or no progress, yet is not OOM-killed. It may still finish, slowly, or be killed. This check run is completed when the runner recovers or ends.\n\n", limit, duration.HumanDuration(s.For()), since)
	}
	return head + "What you can do: " + stallAdvice + "\n" + readings(s.Record)
}

// readings is the command that shows the vitals sidecar's readings, when
// the names are ones the API server allows (it is shown as code).
func readings(r death.Record) string {
	if len(validation.IsDNS1123Label(r.Namespace)) != 0 || len(validation.IsDNS1123Subdomain(r.Pod)) != 0 {
		return ""
	}
	return "\nThe sidecar's readings, while the pod exists: `kubectl logs -n " + r.Namespace + " " + r.Pod + " -c " + runnerpod.VitalsContainer + "`\n"
}

// StallDescription is the stall's commit status description, within
// GitLab's limit: GitLab shows no more than this.
func StallDescription(s Stall) string {
	if s.Phase == StallUnderWay {
		return cut(StallTitle(s)+" for "+duration.HumanDuration(s.For())+" so far: "+stallAdvice, MaxDescription)
	}
	return cut(StallTitle(s), MaxDescription)
}

// Stall report writes, as StallWrite decides them.
const (
	StallNone     = ""
	StallOpen     = "open"
	StallComplete = "complete"
)

// StallWrite is the one write a stall's phase calls for, given whether its
// report is open on the commit now (an in-progress check run, a running
// status). A stall already told (by an earlier leader) is not told again;
// an end completes only a report still open (a death's report may have
// completed it already), so each transition writes at most once.
func StallWrite(phase string, open bool) string {
	switch {
	case phase == StallUnderWay && !open:
		return StallOpen
	case phase != StallUnderWay && open:
		return StallComplete
	}
	return StallNone
}

// StallSender tells a stall on the job's commit; it returns where.
type StallSender interface {
	TellStall(ctx context.Context, d StallDelivery) (where string, err error)
}
