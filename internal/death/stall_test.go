package death

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// stallFinal is a v2 final reading at 12:10:05 whose runner container
// ("runner-1", 8 GiB limit) stalled from 12:01:00; stall is the "stall"
// member's JSON.
func stallFinal(stall string) string {
	return `{"v":1,"ts":"2026-11-01T12:10:05Z","cg":"v2","oom":0,"oom_kill":0,"limit":9663676416,` +
		`"containers":{"runner-1":{"limit":8589934592,"oom":0,"oom_kill":0}}` + stall + `}`
}

func TestARecordCarriesTheStallTheRunnerDiedIn(t *testing.T) {
	began := metav1.NewTime(time.Date(2026, 11, 1, 12, 1, 0, 0, time.UTC))
	cases := []struct {
		name  string
		stall string
		want  *v1alpha1.Stall
	}{
		{
			name:  "a stall that ended with the runner's cgroup is carried, with how long and the worst pressure",
			stall: `,"stall":{"began":"2026-11-01T12:01:00Z","ended":"2026-11-01T12:09:58Z","worst_full":97.4,"basis":"pressure","container":"runner-1"}`,
			want: &v1alpha1.Stall{Began: began, Ended: ptr.To(metav1.NewTime(time.Date(2026, 11, 1, 12, 9, 58, 0, time.UTC))),
				For: metav1.Duration{Duration: 8*time.Minute + 58*time.Second}, WorstPressure: ptr.To(int32(97)),
				Basis: "pressure", Scope: ScopeContainer, Limit: ptr.To(int64(8 << 30))},
		},
		{
			name:  "a stall that lasted to the final reading lasts to the runner's end",
			stall: `,"stall":{"began":"2026-11-01T12:01:00Z","worst_full":88,"basis":"pressure","container":"runner-1"}`,
			want: &v1alpha1.Stall{Began: began, For: metav1.Duration{Duration: 9 * time.Minute}, WorstPressure: ptr.To(int32(88)),
				Basis: "pressure", Scope: ScopeContainer, Limit: ptr.To(int64(8 << 30))},
		},
		{
			name:  "the pod's own stall names the pod's limit",
			stall: `,"stall":{"began":"2026-11-01T12:01:00Z","worst_full":60,"basis":"pressure"}`,
			want: &v1alpha1.Stall{Began: began, For: metav1.Duration{Duration: 9 * time.Minute}, WorstPressure: ptr.To(int32(60)),
				Basis: "pressure", Scope: ScopePod, Limit: ptr.To(int64(9 << 30))},
		},
		{
			name:  "another container's stall is said to be a sibling's",
			stall: `,"stall":{"began":"2026-11-01T12:01:00Z","basis":"failcnt","container":"svc-1"}`,
			want:  &v1alpha1.Stall{Began: began, For: metav1.Duration{Duration: 9 * time.Minute}, Basis: "failcnt", Scope: ScopeSibling},
		},
		{
			name:  "a stall that ended minutes before the runner did is not the death's",
			stall: `,"stall":{"began":"2026-11-01T12:01:00Z","ended":"2026-11-01T12:05:00Z","worst_full":97,"basis":"pressure","container":"runner-1"}`,
		},
		{name: "no stall, none carried"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			final := stallFinal(tc.stall)
			r := newRecord(t, podtest.ARCScaleSet("ci", "r").Terminated("runner", 143, "Error").SidecarTerminated(runnerpod.VitalsContainer, final))
			assert.Equal(t, tc.want, r.Stall)
			plain := newRecord(t, podtest.ARCScaleSet("ci", "r").Terminated("runner", 143, "Error").SidecarTerminated(runnerpod.VitalsContainer, stallFinal("")))
			assert.Equal(t, plain.Class, r.Class, "the class stays what ended the runner")
		})
	}
}

func TestAV1RunnerCgroupGoneBeforeItsKillHasNoPeak(t *testing.T) {
	final := func(cg string, gone bool, kill int) string {
		return fmt.Sprintf(`{"v":1,"ts":"2026-11-01T12:10:05Z","cg":%q,"oom":0,"oom_kill":%d,"peak":9437184,"limit":134217728,`+
			`"containers":{"runner-1":{"peak":2621440,"limit":100663296,"oom":0,"oom_kill":%d,"gone":%t}}}`, cg, kill, kill, gone)
	}
	cases := []struct {
		name        string
		final       string
		reason      string
		wantPeak    *int64
		wantUnknown bool
	}{
		{"a v1 runner killed after its last reading has its peak unknown", final("v1", true, 1), "OOMKilled", nil, true},
		{"a v1 runner the runtime says was OOM-killed, its kill uncounted, has its peak unknown", final("v1", true, 0), "OOMKilled", nil, true},
		{"a v1 runner that ended without a kill keeps the highest peak seen", final("v1", true, 0), "Error", ptr.To(int64(2621440)), false},
		{"a v1 runner whose cgroup the final reading still found keeps its peak", final("v1", false, 1), "OOMKilled", ptr.To(int64(2621440)), false},
		{"on v2 the peak the kernel kept is kept", final("v2", true, 1), "OOMKilled", ptr.To(int64(2621440)), false},
		{"a v1 peak read at the limit before the cgroup went is the kernel's and stays", strings.Replace(final("v1", true, 1), `"peak":2621440`, `"peak":100663296`, 1), "OOMKilled", ptr.To(int64(96 << 20)), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecord(t, podtest.ARCScaleSet("ci", "r").Terminated("runner", 137, tc.reason).SidecarTerminated(runnerpod.VitalsContainer, tc.final))
			assert.Equal(t, ScopeContainer, r.Vitals.Scope)
			assert.Equal(t, tc.wantPeak, r.Vitals.Peak)
			assert.Equal(t, tc.wantUnknown, r.Vitals.PeakUnknown)
			assert.Equal(t, ptr.To(int64(96<<20)), r.Vitals.Limit, "the limit it was killed at")
		})
	}
}
