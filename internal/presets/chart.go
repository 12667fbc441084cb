package presets

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/runnerguard/runnerguard/internal/fleet"
)

// ChartTablePath is the chart's fleet table, relative to the repository:
// generated from All by ChartTable (`make fleet-table`), never edited by
// hand; a fast test fails when it is stale.
const ChartTablePath = "charts/runnerguard/templates/_fleets.tpl"

// chartRow is one fleet as the chart's templates read it.
type chartRow struct {
	Name string `json:"name"`
	// JobOwner: its owner ends a job by deleting its pod
	// (ownerPrincipals); OwnerInRunnerNamespace: that owner may run in
	// the runner namespace.
	JobOwner               bool `json:"jobOwner,omitempty"`
	OwnerInRunnerNamespace bool `json:"ownerInRunnerNamespace,omitempty"`
	fleet.Chart
}

// ChartTable is the chart's fleet table: the helper runnerguard.presets,
// which every template reads as (fromJson (include "runnerguard.presets"
// .)).presets, one row per fleet in All's order.
func ChartTable() ([]byte, error) {
	rows := make([]chartRow, len(All))
	for i, f := range All {
		t := f.Traits()
		rows[i] = chartRow{Name: string(f.Name()), JobOwner: t.Owner.EndsJob, OwnerInRunnerNamespace: t.Owner.InRunnerNamespace, Chart: t.Chart}
	}
	var table bytes.Buffer
	enc := json.NewEncoder(&table)
	enc.SetEscapeHTML(false) // CEL's && reads as itself
	enc.SetIndent("", "  ")
	if err := enc.Encode(map[string]any{"presets": rows}); err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, `{{/*
The fleets the chart knows, in the order the webhook matches them, each
with what the chart states of it. Generated from internal/presets (each
fleet's Traits) by `+"`make fleet-table`"+`: do not edit. fits: its fleet's
marks on a pod, in CEL, the pod's expression as %%[1]s (none: any pod).
marks: the marks that decide a pod's preset, and whether a change of the
mark's value or only of its presence counts. signal: the mark only its
fleet's controller (controllerPrincipals) may change, and why. jobOwner:
its owner ends a job by deleting its pod (ownerPrincipals);
ownerInRunnerNamespace: its owner may run in the runner namespace.
needsControllers: why it cannot run without controllerPrincipals.
ownerRecord: the fleet's object whose deletion the guard notes. jobMarks:
the job's marks on the pod are the fleet's word, kept as created.
Read as (fromJson (include "runnerguard.presets" .)).presets.
*/}}
{{- define "runnerguard.presets" -}}
%s{{- end }}
`, table.Bytes()), nil
}
