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
// the mode and how to switch runnerguard off, and warn when legacy ARC's
// preset trusts no controller.
func TestNotesSayTheModeTheNamespacesAndTheOffSwitches(t *testing.T) {
	const selector = "kubectl get namespaces -l 'runnerguard.io/enabled=true,kubernetes.io/metadata.name notin (kube-system,kube-public,kube-node-lease,runnerguard,cert-manager)'"
	offSwitches := []string{
		"kubectl label namespace <runners-namespace> runnerguard.io/enabled-",
		"kubectl delete validatingwebhookconfiguration runnerguard; kubectl delete validatingadmissionpolicybinding runnerguard",
	}
	const warnEverywhere = "helm upgrade runnerguard <this chart> -n runnerguard --reuse-values --set guard.mode=warn"
	const legacyWarning = "presets.arc-legacy.controllerPrincipals is empty"
	const ownerWarning = "presets.gitlab.ownerInRunnerNamespace is true"
	cases := []struct {
		name, values  string
		want, notWant []string
	}{
		{
			name: "defaults: enforce, the opt-in label, legacy ARC trusting nobody",
			want: append([]string{
				"Mode: enforce (deletes of busy runners are refused with 403, their evictions with 429).",
				"Failure policies while no webhook pod answers: deletes Fail, evictions Fail.",
				selector,
				"kubectl label namespace <runners-namespace> runnerguard.io/enabled=true",
				"kubectl label namespace <runners-namespace> runnerguard.io/mode=warn --overwrite",
				legacyWarning,
				warnEverywhere,
			}, offSwitches...),
			notWant: []string{"DeleteRefusedInWarnMode", ownerWarning},
		},
		{
			name:   "the quick start: warn with both failure policies Ignore",
			values: "guard: {mode: warn, deleteFailurePolicy: Ignore, evictionFailurePolicy: Ignore}",
			want: append([]string{
				"Mode: warn (nothing is refused; each delete or eviction enforce would refuse is reported).",
				"Failure policies while no webhook pod answers: deletes Ignore, evictions Ignore.",
				"kubectl get events -A --field-selector reason=DeleteRefusedInWarnMode",
				"kubectl get events -A --field-selector reason=EvictionRefusedInWarnMode",
				"kubectl label namespace <runners-namespace> runnerguard.io/mode=enforce --overwrite",
				"--set guard.mode=enforce --set guard.deleteFailurePolicy=Fail --set guard.evictionFailurePolicy=Fail",
				"the chart is in warn mode: the guard refuses nothing",
			}, offSwitches...),
			notWant: []string{warnEverywhere},
		},
		{
			name:    "listed namespaces replace the label",
			values:  "namespaces: [ci, builds]",
			want:    []string{"(listed in the chart's namespaces value: ci, builds)", "kubernetes.io/metadata.name in (ci,builds)"},
			notWant: []string{"runnerguard.io/enabled=true"},
		},
		{
			name:    "legacy ARC's controller named: no warning",
			values:  `presets: {arc-legacy: {controllerPrincipals: ["system:serviceaccount:arc:legacy"]}}`,
			notWant: []string{legacyWarning},
		},
		{
			name:   "GitLab's manager trusted in the build pods' namespace: a warning saying who can then end jobs",
			values: "presets: {gitlab: {ownerInRunnerNamespace: true}}",
			want:   []string{ownerWarning, "Anyone granted edit in that namespace can impersonate it"},
		},
		{
			name:    "legacy ARC not run: no warning",
			values:  "presets: {arc-legacy: {enabled: false}}",
			notWant: []string{legacyWarning},
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
