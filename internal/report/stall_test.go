package report

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
)

func TestWhyLeadsWithTheStallTheRunnerDiedIn(t *testing.T) {
	stalled := func(s *v1alpha1.Stall) death.Record {
		return death.Record{Namespace: "ci", DeathRecord: v1alpha1.DeathRecord{Pod: "r", UID: "u", Preset: "gitlab", Container: "build",
			ExitCode: ptr.To(int32(143)), Signal: 15, Class: string(death.JobTimeout), StartedAt: at(0), FinishedAt: at(time.Hour),
			Stall: s}}
	}
	cases := []struct {
		name string
		r    death.Record
		lead string // the line after the pod's; "" for none
	}{
		{
			name: "a timed-out job stalled at its container's limit leads with the stall, then its class",
			r: stalled(&v1alpha1.Stall{Began: metav1.Time{Time: t0.Add(51 * time.Minute)}, For: metav1.Duration{Duration: 9*time.Minute + 12*time.Second},
				WorstPressure: ptr.To(int32(98)), Basis: "pressure", Scope: death.ScopeContainer, Limit: ptr.To(int64(8 << 30))}),
			lead: "the runner spent its last 9 minutes stalled at its 8 GiB limit (every task waiting on memory up to 98% of the time), from 2026-11-01T12:03:00Z",
		},
		{
			name: "a v1 stall says it is the weaker judgement",
			r: stalled(&v1alpha1.Stall{Began: metav1.Time{Time: t0.Add(59 * time.Minute)}, For: metav1.Duration{Duration: 45 * time.Second},
				Basis: "failcnt", Scope: death.ScopePod, Limit: ptr.To(int64(1536 << 20))}),
			lead: "the runner spent its last 45 seconds stalled at the pod's 1.5 GiB limit, from 2026-11-01T12:11:00Z; judged on cgroup v1 from failing charges with its memory full, a weaker sign than v2's pressure",
		},
		{name: "a death with no stall starts with its class", r: stalled(nil)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lines := strings.Split(Summary(tc.r), "\n")
			if tc.lead == "" {
				assert.True(t, strings.HasPrefix(lines[1], `runner "build" died: job-timeout`), lines[1])
				return
			}
			assert.Equal(t, tc.lead, lines[1])
			assert.Equal(t, "  raise its memory limit, or move the job to a bigger lane", lines[2])
			assert.True(t, strings.HasPrefix(lines[3], `runner "build" died: job-timeout`), "the class is kept: %s", lines[3])
		})
	}
}

func TestWhySaysAV1PeakNeverReadIsUnknown(t *testing.T) {
	r := death.Record{Namespace: "ci", DeathRecord: v1alpha1.DeathRecord{Pod: "r", UID: "u", Preset: "arc-scale-set", Container: "runner",
		ExitCode: ptr.To(int32(137)), Reason: "OOMKilled", Class: string(death.CgroupOOM),
		Vitals: &v1alpha1.Vitals{Cgroup: "v1", Scope: death.ScopeContainer,
			Memory: v1alpha1.Memory{PeakUnknown: true, Limit: ptr.To(int64(96 << 20)), OOMKill: 1}}}}
	assert.Contains(t, Summary(r), `memory of the runner container "runner" (its own cgroup, v1): peak unknown (the cgroup was removed between the sidecar's last reading and the OOM kill; the kill came at its limit) of 96Mi limit`)
}
