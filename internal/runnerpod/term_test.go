package runnerpod_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// A runner's protection in time: the cap from its start, or the pod's own
// deadline when sooner; expired past the cap by a whole second, or at the
// deadline itself.
func TestTermOf(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	preset := runnerpod.Preset{MaxProtected: metav1.Duration{Duration: time.Hour}}
	for _, c := range []struct {
		name string
		pod  *podtest.Wrapper
		want runnerpod.Term
	}{
		{"running ten minutes: protected to its cap", podtest.Runner("ci", "r").RunningSince("runner", now.Add(-10*time.Minute)),
			runnerpod.Term{Since: now.Add(-10 * time.Minute), Ran: 10 * time.Minute, Ends: now.Add(50 * time.Minute)}},
		{"at the cap itself: still protected", podtest.Runner("ci", "r").RunningSince("runner", now.Add(-time.Hour)),
			runnerpod.Term{Since: now.Add(-time.Hour), Ran: time.Hour, Ends: now}},
		{"a second past the cap: expired", podtest.Runner("ci", "r").RunningSince("runner", now.Add(-time.Hour-time.Second)),
			runnerpod.Term{Since: now.Add(-time.Hour - time.Second), Ran: time.Hour + time.Second, Ends: now.Add(-time.Second), Expired: runnerpod.ExpiredCap}},
		{"a sooner deadline ends it", podtest.Runner("ci", "r").RunningSince("runner", now.Add(-10*time.Minute)).ActiveDeadline(1200, now.Add(-11*time.Minute)),
			runnerpod.Term{Since: now.Add(-10 * time.Minute), Ran: 10 * time.Minute, Ends: now.Add(9 * time.Minute), ByDeadline: true}},
		{"the deadline come: expired", podtest.Runner("ci", "r").RunningSince("runner", now.Add(-10*time.Minute)).ActiveDeadline(600, now.Add(-10*time.Minute)),
			runnerpod.Term{Since: now.Add(-10 * time.Minute), Ran: 10 * time.Minute, Ends: now, ByDeadline: true, Expired: runnerpod.ExpiredDeadline}},
		{"a later deadline leaves the cap", podtest.Runner("ci", "r").RunningSince("runner", now.Add(-10*time.Minute)).ActiveDeadline(7200, now.Add(-10*time.Minute)),
			runnerpod.Term{Since: now.Add(-10 * time.Minute), Ran: 10 * time.Minute, Ends: now.Add(50 * time.Minute)}},
		{"no start reported: the deadline alone", podtest.Runner("ci", "r").Running("runner").ActiveDeadline(600, now.Add(-time.Minute)),
			runnerpod.Term{Ends: now.Add(9 * time.Minute), ByDeadline: true}},
		{"neither known: nothing ends it", podtest.Runner("ci", "r").Running("runner"), runnerpod.Term{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pod := c.pod.Obj()
			if s := pod.Status.ContainerStatuses; len(s) > 0 && c.want.Since.IsZero() && s[0].State.Running != nil {
				s[0].State.Running.StartedAt = metav1.Time{}
			}
			got := runnerpod.TermOf(pod, runnerpod.RunnerStatus(pod, []string{"runner"}), preset, now)
			got.Since, c.want.Since = got.Since.UTC(), c.want.Since.UTC()
			got.Ends, c.want.Ends = got.Ends.UTC(), c.want.Ends.UTC()
			assert.Equal(t, c.want, got)
		})
	}
}
