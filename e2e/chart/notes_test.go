package chart_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// notes renders the chart's install notes as `helm install` prints them,
// without a cluster (a client-side dry run). Helm 4 only: Helm 3's install
// asks a cluster for its version even in a client-side dry run, and
// `helm template` prints no notes; TestHelm3AndHelm4RenderTheSame holds the
// two Helms' templates equal.
func (h helm) notes(t *testing.T, values string) string {
	t.Helper()
	args := []string{"install", release, chartDir, "--namespace", namespace, "--dry-run=client"}
	if values != "" {
		f := filepath.Join(valuesDir(t), "values.yaml")
		require.NoError(t, os.WriteFile(f, []byte(values), 0o600))
		args = append(args, "--values", f)
	}
	out, err := h.run(args...)
	require.NoError(t, err, out)
	return out
}

// The notes a first install prints say which mode is on, which namespaces
// are acted in, how to read what warn mode would have refused, how to switch
// the mode, which fleets to choose, and how to switch runnerguard off with
// commands that need no runnerguard pod.
func TestNotesSayTheModeTheNamespacesAndTheOffSwitches(t *testing.T) {
	const selector = "kubectl get namespaces -l 'runnerguard.io/enabled=true,kubernetes.io/metadata.name notin (kube-system,kube-public,kube-node-lease,runnerguard,cert-manager)'"
	offSwitches := []string{
		"kubectl label namespace <runners-namespace> runnerguard.io/mode=warn --overwrite",
		`kubectl patch validatingwebhookconfiguration runnerguard --type=json -p '[{"op":"test","path":"/webhooks/0/name","value":"delete.guard.runnerguard.io"},{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"},`,
		"kubectl delete pdb -A -l app.kubernetes.io/managed-by=runnerguard",
		"kubectl delete validatingwebhookconfiguration runnerguard\n",
	}
	const pickPresets = "helm upgrade runnerguard <this chart> -n runnerguard --reuse-values --set 'presets.enabled={arc-scale-set,gitlab}'"
	const ownerWarning = "presets.gitlab.ownerInRunnerNamespace is true"
	cases := []struct {
		name, values  string
		want, notWant []string
	}{
		{
			name: "defaults: warn, the opt-in label, no fleet chosen yet",
			want: append([]string{
				"Mode: warn (nothing is refused; each delete or eviction enforce would refuse is reported).",
				"While no webhook pod answers: warn namespaces refuse nothing; in enforce namespaces deletes are refused, evictions let through except busy runners' (their PodDisruptionBudget).",
				"No fleet is chosen yet, so runnerguard judges and instruments no pod.",
				pickPresets,
				selector,
				"kubectl label namespace <runners-namespace> runnerguard.io/enabled=true",
				"kubectl get events -A --field-selector reason=DeleteRefusedInWarnMode",
				"kubectl get events -A --field-selector reason=EvictionRefusedInWarnMode",
				"kubectl label namespace <runners-namespace> runnerguard.io/mode=enforce --overwrite",
				"--reuse-values --set guard.rollout=enforce",
			}, offSwitches...),
			notWant: []string{ownerWarning, "Legacy (summerwind) ARC", "validatingadmissionpolicybinding"},
		},
		{
			name:   "enforce: one value",
			values: "guard: {rollout: enforce}\npresets: {enabled: [gitlab, arc-scale-set]}",
			want: append([]string{
				"Mode: enforce (deletes of busy runners are refused with 403, their evictions with 429).",
				"Fleets: gitlab, arc-scale-set.",
				"--reuse-values --set guard.rollout=warn",
			}, offSwitches...),
			notWant: []string{"DeleteRefusedInWarnMode", pickPresets},
		},
		{
			name:    "listed namespaces replace the label",
			values:  "namespaces: [ci, builds]",
			want:    []string{"(listed in the chart's namespaces value: ci, builds)", "kubernetes.io/metadata.name in (ci,builds)"},
			notWant: []string{"runnerguard.io/enabled=true"},
		},
		{
			name:   "GitLab's manager trusted in the build pods' namespace: a warning saying who can then end jobs",
			values: "presets: {enabled: [gitlab], gitlab: {ownerInRunnerNamespace: true}}",
			want:   []string{ownerWarning, "Anyone granted edit in that namespace can impersonate it"},
		},
	}
	h := helm4(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := h.notes(t, tc.values)
			for _, w := range tc.want {
				assert.Contains(t, out, w)
			}
			for _, w := range tc.notWant {
				assert.NotContains(t, out, w)
			}
		})
	}
}
