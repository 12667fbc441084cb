package death

import (
	"math"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/vitals/record"
)

// stallSlack is how long before the runner's end a stall may have ended
// and still be the runner's last state: the sidecar judges once a reading
// interval, and a cgroup removed with the runner ends its stall at the last
// reading that saw it.
const stallSlack = 15 * time.Second

// The scopes of a stall besides ScopeContainer and ScopePod.
const ScopeSibling = "sibling" // another container of the pod

// lastStall is the stall the final reading f tells, when it lasted until
// the runner's end (r's FinishedAt, else the final reading): the death
// followed it. r's vitals name the limit of the runner's own cgroup.
func lastStall(f record.Final, r *Record) *v1alpha1.Stall {
	st := f.Stall
	if st == nil {
		return nil
	}
	end := f.Time
	if r.FinishedAt != nil && r.FinishedAt.Time.Before(end) {
		end = r.FinishedAt.Time
	}
	if st.Ended != nil && st.Ended.Before(end.Add(-stallSlack)) {
		return nil
	}
	until := end
	if st.Ended != nil {
		until = *st.Ended
	}
	out := &v1alpha1.Stall{
		Began: metav1.Time{Time: st.Began}, Basis: st.Basis,
		For: metav1.Duration{Duration: max(until.Sub(st.Began), 0).Truncate(time.Second)},
	}
	if st.Ended != nil {
		out.Ended = timePtr(*st.Ended)
	}
	if w := st.WorstFull; w != nil {
		out.WorstPressure = ptr.To(int32(math.Round(min(max(*w, 0), 100))))
	}
	_, runnerID, _ := strings.Cut(r.ContainerID, "://")
	limit := f.Limit
	switch {
	case st.Container == "":
		out.Scope = ScopePod
	case st.Container == runnerID && runnerID != "":
		out.Scope = ScopeContainer
		limit = f.Containers[st.Container].Limit
	default:
		out.Scope = ScopeSibling
		limit = f.Containers[st.Container].Limit
	}
	if limit != nil {
		out.Limit = ptr.To(int64(*limit))
	}
	return out
}

// unknownPeak leaves out a v1 runner container's peak that is only a stale
// sample: its cgroup was gone before the final reading, it was OOM-killed
// (the kernel's count, or the runtime's reason), and the highest peak read
// is well short of its limit, so it grew to the limit after
// the last reading that saw it. A peak read at the limit is the kernel's
// own high-water mark and stays.
func unknownPeak(v *v1alpha1.Vitals, f record.Final, r *Record) {
	if v == nil || v.Cgroup != "v1" || v.Scope != ScopeContainer {
		return
	}
	_, id, _ := strings.Cut(r.ContainerID, "://")
	c := f.Containers[id]
	if !c.Gone || (c.OOMKill == 0 && r.Reason != reasonOOMKilled) {
		return
	}
	if v.Peak != nil && v.Limit != nil && *v.Peak >= *v.Limit/10*9 {
		return
	}
	v.Peak, v.PeakObserved, v.PeakUnknown = nil, false, true
}
