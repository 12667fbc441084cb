package notify

import (
	"cmp"
	"slices"
	"strings"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
)

// Withheld stands in a report for a name the operator did not opt in to
// show (config.Reports.Disclose).
const Withheld = "(withheld)"

// Shown is the record as the delivery's destination may show it: whole
// where the operator opted in, else Public.
func (d Delivery) Shown() death.Record {
	if d.Target.Disclose {
		return d.Record
	}
	return Public(d.Record)
}

// Public is the record as a page anyone may read can show it: a check run
// or a commit status of a public repository is public. Who deleted the pod,
// who asked for it (an eviction request's too) and the reason they gave,
// who was refused, the node and
// the pod's and container's ids are withheld, here and wherever the free
// text the kubelet, the scheduler or the runner wrote repeats them; the
// class, the job, the figures and what to do stay.
func Public(r death.Record) death.Record {
	// The ids also as cgroup paths and the kubelet write them: the UID
	// with underscores (systemd's slices), the container id without its
	// runtime's prefix.
	_, bareID, _ := strings.Cut(r.ContainerID, "://")
	names := []string{r.UID, strings.ReplaceAll(r.UID, "-", "_"), r.ContainerID, bareID, r.Node, r.DeletedBy, r.StartedBy, r.DeleteReason}
	r.UID, r.ContainerID, r.Node = withhold(r.UID), withhold(r.ContainerID), withhold(r.Node)
	r.DeletedBy, r.StartedBy, r.DeleteReason = withhold(r.DeletedBy), withhold(r.StartedBy), withhold(r.DeleteReason)
	if l := r.Refusals; l != nil {
		c := l.DeepCopy()
		for i := range c.Entries {
			names = append(names, c.Entries[i].By)
			c.Entries[i].By = withhold(c.Entries[i].By)
		}
		r.Refusals = c
	}
	if er := r.EvictionRequest; er != nil {
		// Who asked, and the names they gave their requests.
		c := er.DeepCopy()
		names = append(append(names, c.Names...), c.Requesters...)
		c.Names, c.Requesters = withheldAll(c.Names), withheldAll(c.Requesters)
		r.EvictionRequest = c
	}
	if j := r.Job; j != nil && j.CreatedBy != "" {
		c := j.DeepCopy()
		names = append(names, c.CreatedBy)
		c.CreatedBy = Withheld
		r.Job = c
	}
	scrub := scrubber(names)
	r.PodMessage, r.ClassBasis, r.Message = scrub(r.PodMessage), scrub(r.ClassBasis), scrub(r.Message)
	if d := r.Disruption; d != nil {
		r.Disruption = &v1alpha1.Disruption{Reason: d.Reason, Message: scrub(d.Message)}
	}
	return r
}

func withheldAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = withhold(s)
	}
	return out
}

func withhold(s string) string {
	if s == "" {
		return ""
	}
	return Withheld
}

// scrubber replaces each name in a text, longest first (a node's name
// may hold a shorter one). Names of fewer than 3 characters are left:
// replacing them would cut words apart and hide nothing.
func scrubber(names []string) func(string) string {
	names = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return len(n) < 3 })
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	var pairs []string
	for _, n := range slices.Compact(names) {
		pairs = append(pairs, n, Withheld)
	}
	r := strings.NewReplacer(pairs...)
	return r.Replace
}
