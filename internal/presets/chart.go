package presets

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// ChartTablePath is the chart's fleet table, relative to the repository:
// generated from All by ChartTable (`make fleet-table`), never edited by
// hand; a fast test fails when it is stale.
const ChartTablePath = "charts/runnerguard/templates/_fleets.tpl"

// SchemaPath is the chart's values schema, whose fleet lists
// (definitions.presetName, and presets' properties) SchemaNames writes
// from Order.
const SchemaPath = "charts/runnerguard/values.schema.json"

// The schema's fleet lists as the file writes them: the enum of
// definitions.presetName, and the presets' properties after enabled's.
var (
	presetNameEnum = regexp.MustCompile(`("presetName": \{\s*"description": "[^"]*",\s*"enum": )\[[^\]]*\]`)
	presetsProps   = regexp.MustCompile(`(?s)(\n    "presets": \{\n      "type": "object",\n      "additionalProperties": false,\n      "properties": \{\n        "enabled": \{.*?\n        \})(.*?)(\n      \},\n      "description": "One entry per known fleet)`)
)

// SchemaNames is the values schema with its fleet lists (the names
// presets.enabled, presets.<name>, reports.presets and
// reports.disclose.presets may take) set to Order.
func SchemaNames(schema []byte) ([]byte, error) {
	if !presetNameEnum.Match(schema) || !presetsProps.Match(schema) {
		return nil, fmt.Errorf("%s: no definitions.presetName enum or presets' properties", SchemaPath)
	}
	names := make([]string, len(Order))
	var props strings.Builder
	for i, n := range Order {
		names[i] = fmt.Sprintf("%q", n)
		fmt.Fprintf(&props, ",\n        %q: {\n          \"$ref\": \"#/definitions/preset\"\n        }", n)
	}
	list := "[\n        " + strings.Join(names, ",\n        ") + "\n      ]"
	schema = presetNameEnum.ReplaceAll(schema, []byte("${1}"+strings.ReplaceAll(list, "$", "$$")))
	return presetsProps.ReplaceAll(schema, []byte("${1}"+strings.ReplaceAll(props.String(), "$", "$$")+"${3}")), nil
}

// chartRow is one fleet as the chart's templates read it.
type chartRow struct {
	Name string `json:"name"`
	// JobOwner: its owner ends a job by deleting its pod
	// (ownerPrincipals); OwnerInRunnerNamespace: that owner may run in
	// the runner namespace.
	JobOwner               bool `json:"jobOwner,omitempty"`
	OwnerInRunnerNamespace bool `json:"ownerInRunnerNamespace,omitempty"`
	// Defaults are the preset's values a release that leaves them out
	// gets, so a fleet needs no block of its own in values.yaml.
	Defaults chartDefaults `json:"defaults"`
	// OwnView is the owner whose conditions the record keeps
	// (fleet.OwnView): the leader gets it.
	OwnView *fleet.ChartResource `json:"ownView,omitempty"`
	fleet.Chart
}

// chartDefaults are the preset's values the chart fills in (maxProtected
// and the job keys the server fills in itself, config.mergePresets), and
// the job keys of a fleet whose deaths are told on its CI service: the
// policy keeps those marks as created (jobMarks) only where the chart
// knows them.
type chartDefaults struct {
	RunnerContainers []string           `json:"runnerContainers"`
	DiagnosticEnv    []corev1.EnvVar    `json:"diagnosticEnv"`
	Job              *runnerpod.JobKeys `json:"job,omitempty"`
}

// ChartTable is the chart's fleet table: the helper runnerguard.presets,
// which every template reads as (fromJson (include "runnerguard.presets"
// .)).presets, one row per fleet in All's order.
func ChartTable() ([]byte, error) {
	rows := make([]chartRow, len(All))
	for i, f := range All {
		t := f.Traits()
		d := f.Defaults()
		rows[i] = chartRow{Name: string(f.Name()), JobOwner: t.Owner.EndsJob, OwnerInRunnerNamespace: t.Owner.InRunnerNamespace, Chart: t.Chart,
			Defaults: chartDefaults{RunnerContainers: d.RunnerContainers, DiagnosticEnv: append([]corev1.EnvVar{}, d.DiagnosticEnv...)}}
		if t.OwnView != nil {
			rows[i].OwnView = &t.OwnView.Owner
		}
		if t.ToldOn != fleet.ToldNowhere && t.Chart.JobMarks && d.Job != (runnerpod.JobKeys{}) {
			rows[i].Defaults.Job = &d.Job
		}
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
ownerRecord: the fleet's object whose deletion the guard notes. ownView:
the pod's owner whose conditions a death record keeps. jobMarks:
the job's marks on the pod are the fleet's word, kept as created.
defaults: the preset's values where a release leaves them out
(runnerguard.preset). Read as (fromJson (include "runnerguard.presets" .)).presets.
*/}}
{{- define "runnerguard.presets" -}}
%s{{- end }}
`, table.Bytes()), nil
}
