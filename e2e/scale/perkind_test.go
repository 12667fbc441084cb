//go:build scale

package scale

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// kindCost is what runnerguard's requests came to for the runners of one
// kind: how many runners, and their requests (Events, records, notes, pod
// reads and patches that name them).
type kindCost struct {
	runners, requests, writes int
	// most are the writes of the runner that made the most.
	most []string
}

// requestsByKind sums requestsByPod over the runners of each kind.
func requestsByKind(path string, from, to time.Time, rs []*runner) (map[string]kindCost, error) {
	uids := map[string]string{}
	for _, r := range rs {
		uids[string(r.uid)] = r.ns + "/" + r.name
	}
	byPod, writes, err := requestsByPod(path, from, to, uids)
	if err != nil {
		return nil, err
	}
	out := map[string]kindCost{}
	for _, r := range rs {
		c := out[r.kind()]
		c.runners++
		c.requests += byPod[r.ns+"/"+r.name]
		w := writes[r.ns+"/"+r.name]
		c.writes += len(w)
		if len(w) > len(c.most) {
			c.most = w
		}
		out[r.kind()] = c
	}
	return out, nil
}

// formatKinds prints the requests per runner of each kind, most first.
func formatKinds(m map[string]kindCost) string {
	kinds := make([]string, 0, len(m))
	for k := range m {
		kinds = append(kinds, k)
	}
	per := func(k string) float64 { return float64(m[k].requests) / float64(max(1, m[k].runners)) }
	sort.Slice(kinds, func(i, j int) bool { return per(kinds[i]) > per(kinds[j]) })
	var b strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&b, "  %-54s %6d runners  %.2f requests each, %.2f writes\n", k, m[k].runners, per(k), float64(m[k].writes)/float64(max(1, m[k].runners)))
	}
	return b.String()
}
