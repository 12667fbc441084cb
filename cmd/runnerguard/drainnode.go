package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kdrain "k8s.io/kubectl/pkg/drain"

	"github.com/runnerguard/runnerguard/internal/drain"
)

// cordon marks the nodes unschedulable, with kubectl's cordon helper.
func (r *drainRun) cordon(ctx context.Context) error {
	for _, n := range r.nodes {
		c := kdrain.NewCordonHelper(n)
		if c.UpdateIfRequired(true) {
			if err, patchErr := c.PatchOrReplaceWithContext(ctx, r.cs, false); err != nil {
				return fmt.Errorf("cordoning node %s: %w (%v)", n.Name, err, patchErr)
			}
		}
		r.screen.Logf("node/%s cordoned", n.Name)
		r.report.Cordoned(n.Name)
	}
	return r.reportConditions(ctx, false)
}

// reportConditions sets the node-lifecycle conditions of the drain's point
// (drain.Conditions) on each node, with --report-node-conditions.
func (r *drainRun) reportConditions(ctx context.Context, drained bool) error {
	if !r.o.reportConditions {
		return nil
	}
	msg := fmt.Sprintf("kubectl runnerguard drain of node(s) %s", strings.Join(r.names, ", "))
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": drain.Conditions(drained, time.Now(), msg)}})
	if err != nil {
		return err
	}
	for _, n := range r.names {
		if _, err := r.cs.CoreV1().Nodes().Patch(ctx, n, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			return fmt.Errorf("reporting the drain in node %s's conditions: %w", n, err)
		}
		r.screen.Logf("node/%s: %s=%t, %s=%t", n, drain.ConditionDrainInProgress, !drained, drain.ConditionDrained, drained)
	}
	return nil
}
