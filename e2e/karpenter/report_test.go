//go:build karpenter

package karpenter

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// reportOf is the run's table: per setup, the node-seconds from the jobs'
// start (t0) to the long jobs' end (t2), the busy runners lost, and the
// marks left on pods whose job had ended.
func reportOf(setups []*setup, perRole int, provisioned, window, afterShort time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nKarpenter %s (kwok provider), %d nodes of each role per setup (%d runners each, %d per node); Karpenter launched them in %s.\n",
		strings.TrimPrefix(filepath.Base(os.Getenv("KARPENTER_DIR")), "karpenter-"), perRole, perRole*int(roles)*perNode, perNode, provisioned.Round(time.Second))
	fmt.Fprintf(&b, "Measured from the jobs' start to the long jobs' end: %s (the short jobs ended %s before it).\n\n",
		window.Round(time.Second), afterShort.Round(time.Second))
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "setup\tnode-s, all runners idle\tnode-s, no runner\tnode-s, all\tnodes removed (goes idle, stays busy, mixed)\tgoes-idle nodes left\tbusy runners lost\tmarks left after the job")
	for _, s := range setups {
		fmt.Fprintf(w, "%s\t%.0f\t%.0f\t%.0f\t%d, %d, %d\t%d of %d\t%d of %d\t%d\n", s.name, s.idleOnly, s.empty, s.total, s.removed[goesIdle], s.removed[staysBusy], s.removed[mixed],
			s.idleBoundLeft, perRole, s.lost, s.busyJobs(), s.marksLeft)
	}
	_ = w.Flush()
	for _, s := range setups {
		if s.consolidated > 0 {
			fmt.Fprintf(&b, "\n%s: the last goes-idle node went %s after the short jobs ended.\n", s.name, s.consolidated.Round(time.Second))
		}
	}
	return b.String()
}

func (s *setup) busyJobs() int {
	n := 0
	for _, r := range s.runners {
		if r.job != idle {
			n++
		}
	}
	return n
}
