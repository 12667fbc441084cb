package chart_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// flag returns the value of --name=value in args, or "".
func flag(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

func deployment(t *testing.T, objs objects) (appsv1.Deployment, corev1.Container) {
	t.Helper()
	var d appsv1.Deployment
	objs.get(t, "Deployment", release, &d)
	require.Len(t, d.Spec.Template.Spec.Containers, 1)
	return d, d.Spec.Template.Spec.Containers[0]
}

// mountedCertSecret is the Secret mounted where the server's --cert-dir
// points.
func mountedCertSecret(t *testing.T, objs objects) string {
	t.Helper()
	d, c := deployment(t, objs)
	dir := flag(c.Args, "cert-dir")
	require.NotEmpty(t, dir, "the server has no --cert-dir")
	for _, m := range c.VolumeMounts {
		if m.MountPath != dir {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				return v.Secret.SecretName
			}
		}
	}
	t.Fatalf("no Secret is mounted at --cert-dir %s", dir)
	return ""
}

// chartImage is the image the chart runs by default: its appVersion.
func chartImage(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(chartDir + "/Chart.yaml")
	require.NoError(t, err)
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &chart))
	return "ghcr.io/runnerguard/runnerguard:" + chart.AppVersion
}

// The defaults give a highly available webhook: two replicas spread softly
// over nodes, a disruption budget, probes on the server's health port and
// the binary's flags as its contract states them.
func TestDefaultDeploymentIsHighlyAvailable(t *testing.T) {
	for _, h := range helms(t) {
		t.Run(h.name, func(t *testing.T) {
			t.Parallel()
			objs := h.render(t)
			d, c := deployment(t, objs)

			assert.Equal(t, int32(2), *d.Spec.Replicas)
			assert.Equal(t, chartImage(t), c.Image)
			assert.Equal(t, []string{
				"serve",
				"--config=/etc/runnerguard/config.yaml",
				"--cert-dir=/var/run/secrets/runnerguard/tls",
				"--port=9443",
				"--metrics-bind-address=:8443",
				"--metrics-secure=true",
				"--health-probe-bind-address=:8081",
				"--max-connections-per-source=128",
				"--max-connections=1024",
				"--zap-log-level=info",
				"--leader-elect",
				"--namespace-selector=runnerguard.io/enabled=true,kubernetes.io/metadata.name notin (kube-system,kube-public,kube-node-lease,runnerguard,cert-manager)",
				"--stuck-after=10m",
				"--job-over-interval=10m",
				"--job-over-grace=5m",
				// The leader reads the enforce namespaces from the release's
				// own registration.
				"--webhook-configuration=runnerguard",
			}, c.Args)
			env := map[string]corev1.EnvVarSource{}
			for _, e := range c.Env {
				env[e.Name] = *e.ValueFrom
			}
			// The leader election Lease lives in the release namespace.
			assert.Equal(t, "metadata.namespace", env["POD_NAMESPACE"].FieldRef.FieldPath)
			// The server's soft memory limit follows the container's.
			assert.Equal(t, &corev1.ResourceFieldSelector{ContainerName: "runnerguard", Resource: "limits.memory", Divisor: resource.MustParse("1")},
				env["MEMORY_LIMIT"].ResourceFieldRef)
			ports := map[string]int32{}
			for _, p := range c.Ports {
				ports[p.Name] = p.ContainerPort
			}
			assert.Equal(t, map[string]int32{"webhook": 9443, "metrics": 8443, "health": 8081}, ports)
			require.NotNil(t, c.ReadinessProbe)
			require.NotNil(t, c.LivenessProbe)
			assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
			assert.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
			assert.Equal(t, intstr.FromString("health"), c.ReadinessProbe.HTTPGet.Port)
			assert.NotEmpty(t, c.Resources.Requests)

			var svc corev1.Service
			objs.get(t, "Service", release, &svc)
			assert.Equal(t, d.Spec.Selector.MatchLabels, svc.Spec.Selector)
			for _, p := range svc.Spec.Ports {
				assert.Equal(t, intstr.FromString(p.Name), p.TargetPort, "Service port %s", p.Name)
			}

			spread := d.Spec.Template.Spec.TopologySpreadConstraints
			require.Len(t, spread, 2)
			assert.Equal(t, "kubernetes.io/hostname", spread[0].TopologyKey)
			for _, s := range spread {
				assert.Equal(t, corev1.ScheduleAnyway, s.WhenUnsatisfiable, "spreading must never block scheduling")
				assert.Equal(t, d.Spec.Selector, s.LabelSelector)
			}

			var pdb policyv1.PodDisruptionBudget
			objs.get(t, "PodDisruptionBudget", release, &pdb)
			assert.Equal(t, intstr.FromInt32(1), *pdb.Spec.MaxUnavailable)
			assert.Equal(t, d.Spec.Selector, pdb.Spec.Selector)
			assert.Equal(t, d.Spec.Template.Spec.ServiceAccountName, release)
		})
	}
}

// A config change must roll the pods (the server reads its config once);
// other changes must not.
func TestConfigChecksumRollsPodsOnConfigChangeOnly(t *testing.T) {
	h := helm4(t)
	checksum := func(values string) string {
		d, _ := deployment(t, h.render(t, values))
		sum := d.Spec.Template.Annotations["checksum/config"]
		require.Len(t, sum, 64)
		return sum
	}
	base := checksum("")
	assert.NotEqual(t, base, checksum("presets: {gitlab: {ownerPrincipals: [system:serviceaccount:ci:gitlab-runner]}}"))
	assert.NotEqual(t, base, checksum("presets: {generic: {maxProtected: 24h}}"))
	assert.NotEqual(t, base, checksum("inject: {vitals: {interval: 2s}}"))
	assert.Equal(t, base, checksum("replicaCount: 3\nwebhook: {timeoutSeconds: 10}"))
	assert.Equal(t, base, checksum("guard: {rollout: enforce}"), "the mode is in the registrations: switching it rolls no pod")
}

// Each option renders what it promises and nothing else.
func TestOptions(t *testing.T) {
	cases := []struct {
		name   string
		values string
		check  func(t *testing.T, objs objects)
	}{
		{
			name:   "disabling the disruption budget removes it",
			values: "podDisruptionBudget: {enabled: false}",
			check: func(t *testing.T, objs objects) {
				assert.Nil(t, objs.find("PodDisruptionBudget", release))
			},
		},
		{
			name:   "a ServiceMonitor scrapes the metrics port over HTTPS with its token, checking the serving certificate",
			values: "metrics: {serviceMonitor: {enabled: true, interval: 30s, labels: {release: prom}}}",
			check: func(t *testing.T, objs objects) {
				sm := objs.find("ServiceMonitor", release)
				require.NotNil(t, sm)
				assert.Equal(t, "prom", sm.GetLabels()["release"])
				assert.Equal(t, map[string]any{"port": "metrics", "path": "/metrics", "scheme": "https", "interval": "30s",
					"bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
					"tlsConfig": map[string]any{"serverName": release + "." + namespace + ".svc",
						"ca": map[string]any{"secret": map[string]any{"name": mountedCertSecret(t, objs), "key": "ca.crt"}}},
				}, sm.Object["spec"].(map[string]any)["endpoints"].([]any)[0])
				var reader rbacv1.ClusterRole
				objs.get(t, "ClusterRole", release+"-metrics-reader", &reader)
				assert.Equal(t, []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}, reader.Rules)
				var role rbacv1.ClusterRole
				objs.get(t, "ClusterRole", release, &role)
				assert.Contains(t, role.Rules, rbacv1.PolicyRule{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}})
				assert.Contains(t, role.Rules, rbacv1.PolicyRule{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}})
			},
		},
		{
			name:   "insecure metrics are plain HTTP with no reviews to make",
			values: "metrics: {secure: false, serviceMonitor: {enabled: true}}",
			check: func(t *testing.T, objs objects) {
				_, c := deployment(t, objs)
				assert.Equal(t, "false", flag(c.Args, "metrics-secure"))
				sm := objs.find("ServiceMonitor", release)
				require.NotNil(t, sm)
				assert.Equal(t, map[string]any{"port": "metrics", "path": "/metrics", "scheme": "http"}, sm.Object["spec"].(map[string]any)["endpoints"].([]any)[0])
				assert.Nil(t, objs.find("ClusterRole", release+"-metrics-reader"))
				var role rbacv1.ClusterRole
				objs.get(t, "ClusterRole", release, &role)
				for _, r := range role.Rules {
					assert.NotContains(t, r.Resources, "tokenreviews")
				}
			},
		},
		{
			name:   "no NetworkPolicy by default",
			values: "",
			check: func(t *testing.T, objs objects) {
				assert.Nil(t, objs.find("NetworkPolicy", release))
			},
		},
		{
			name:   "the NetworkPolicy admits the webhook port from anywhere and the metrics port from the given peers only",
			values: "networkPolicy: {enabled: true, metricsFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]}",
			check: func(t *testing.T, objs objects) {
				var np networkingv1.NetworkPolicy
				objs.get(t, "NetworkPolicy", release, &np)
				d, _ := deployment(t, objs)
				assert.Equal(t, *d.Spec.Selector, np.Spec.PodSelector)
				assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, np.Spec.PolicyTypes)
				tcp := corev1.ProtocolTCP
				webhookPort, metricsPort := intstr.FromString("webhook"), intstr.FromString("metrics")
				assert.Equal(t, []networkingv1.NetworkPolicyIngressRule{
					{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &webhookPort}}},
					{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &metricsPort}},
						From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}}}}},
				}, np.Spec.Ingress)
			},
		},
		{
			name:   "the NetworkPolicy admits the webhook port from the API server's peers only, when given",
			values: "networkPolicy: {enabled: true, webhookFrom: [{ipBlock: {cidr: 10.0.0.0/28}}]}",
			check: func(t *testing.T, objs objects) {
				var np networkingv1.NetworkPolicy
				objs.get(t, "NetworkPolicy", release, &np)
				tcp := corev1.ProtocolTCP
				webhookPort := intstr.FromString("webhook")
				assert.Equal(t, networkingv1.NetworkPolicyIngressRule{
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &webhookPort}},
					From:  []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/28"}}},
				}, np.Spec.Ingress[0])
			},
		},
		{
			name:   "disabled metrics turn the server's metrics off and render no ServiceMonitor",
			values: "metrics: {enabled: false, serviceMonitor: {enabled: true}}",
			check: func(t *testing.T, objs objects) {
				_, c := deployment(t, objs)
				assert.Equal(t, "0", flag(c.Args, "metrics-bind-address"))
				assert.Nil(t, objs.find("ServiceMonitor", release))
				var svc corev1.Service
				objs.get(t, "Service", release, &svc)
				require.Len(t, svc.Spec.Ports, 1)
				assert.Equal(t, "webhook", svc.Spec.Ports[0].Name)
			},
		},
		{
			name: "own spread constraints replace the default ones",
			values: `topologySpreadConstraints:
  - {maxSkew: 2, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app.kubernetes.io/name: runnerguard}}}`,
			check: func(t *testing.T, objs objects) {
				d, _ := deployment(t, objs)
				require.Len(t, d.Spec.Template.Spec.TopologySpreadConstraints, 1)
				assert.Equal(t, int32(2), d.Spec.Template.Spec.TopologySpreadConstraints[0].MaxSkew)
			},
		},
		{
			name:   "without the pod watcher there is no leader election and no pod watch",
			values: "watcher: {enabled: false}",
			check: func(t *testing.T, objs objects) {
				_, c := deployment(t, objs)
				assert.Equal(t, "false", flag(c.Args, "watch"))
				assert.NotContains(t, c.Args, "--leader-elect")
				assert.Nil(t, objs.find("Role", release+"-leader-election"))
				assert.Nil(t, objs.find("RoleBinding", release+"-leader-election"))
				var role rbacv1.ClusterRole
				objs.get(t, "ClusterRole", release, &role)
				assert.Contains(t, role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}})
			},
		},
		{
			name:   "the log level reaches the server",
			values: "logLevel: debug",
			check: func(t *testing.T, objs objects) {
				_, c := deployment(t, objs)
				assert.Equal(t, "debug", flag(c.Args, "zap-log-level"))
			},
		},
		{
			name:   "an existing ServiceAccount is used and none is created",
			values: "serviceAccount: {create: false, name: webhooks}",
			check: func(t *testing.T, objs objects) {
				d, _ := deployment(t, objs)
				assert.Equal(t, "webhooks", d.Spec.Template.Spec.ServiceAccountName)
				assert.Nil(t, objs.find("ServiceAccount", release))
				var crb rbacv1.ClusterRoleBinding
				objs.get(t, "ClusterRoleBinding", release, &crb)
				assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "webhooks", Namespace: namespace}}, crb.Subjects)
			},
		},
		{
			name:   "an image digest pins both the server and the sidecar",
			values: "image: {digest: sha256:" + strings.Repeat("ab", 32) + "}",
			check: func(t *testing.T, objs objects) {
				want := "ghcr.io/runnerguard/runnerguard@sha256:" + strings.Repeat("ab", 32)
				_, c := deployment(t, objs)
				assert.Equal(t, want, c.Image)
				assert.Equal(t, want, renderedConfig(t, objs).Inject.Vitals.Image)
			},
		},
	}
	h := helm4(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.check(t, h.render(t, tc.values))
		})
	}
}

// A plain install refuses nothing: no fleet is chosen, so no pod is a
// runner pod, and every namespace not labelled enforce is selected by the
// warn registrations only, which never fail closed and answer in warn.
func TestAPlainInstallRefusesNothing(t *testing.T) {
	for _, h := range helms(t) {
		t.Run(h.name, func(t *testing.T) {
			t.Parallel()
			objs := h.render(t)
			cfg := renderedConfig(t, objs)
			assert.Empty(t, cfg.RunnerContainerNames(), "no preset is on")
			var validating admissionregistrationv1.ValidatingWebhookConfiguration
			objs.get(t, "ValidatingWebhookConfiguration", release, &validating)
			for _, nsLabels := range []map[string]string{
				{"runnerguard.io/enabled": "true", corev1.LabelMetadataName: "ci"},
				{"runnerguard.io/enabled": "true", corev1.LabelMetadataName: "ci", "runnerguard.io/mode": "warn"},
				{"runnerguard.io/enabled": "true", corev1.LabelMetadataName: "ci", "runnerguard.io/mode": "bogus"},
			} {
				for _, w := range validating.Webhooks {
					sel, err := metav1.LabelSelectorAsSelector(w.NamespaceSelector)
					require.NoError(t, err)
					if !sel.Matches(labels.Set(nsLabels)) {
						continue
					}
					assert.Equal(t, admissionregistrationv1.Ignore, *w.FailurePolicy, "%s selects %v", w.Name, nsLabels)
					if strings.HasPrefix(*w.ClientConfig.Service.Path, "/validate-runner-pod/") {
						assert.Equal(t, "/validate-runner-pod/warn", *w.ClientConfig.Service.Path, w.Name)
					}
					for _, mc := range w.MatchConditions {
						if strings.Contains(mc.Expression, "c.name in") {
							assert.Contains(t, mc.Expression, "c.name in []", "%s: no pod is a runner pod", w.Name)
						}
					}
				}
			}
		})
	}
}

// guard.rollout=enforce moves every namespace without a mode label to the
// registrations that refuse (and fail closed for deletes), and no other.
func TestRolloutEnforceSelectsEveryUnlabelledNamespaceForEnforce(t *testing.T) {
	objs := helm4(t).render(t, "guard: {rollout: enforce}\npresets: {enabled: [generic]}")
	var validating admissionregistrationv1.ValidatingWebhookConfiguration
	objs.get(t, "ValidatingWebhookConfiguration", release, &validating)
	paths := func(nsLabels map[string]string) []string {
		var out []string
		for _, w := range validating.Webhooks {
			sel, err := metav1.LabelSelectorAsSelector(w.NamespaceSelector)
			require.NoError(t, err)
			if sel.Matches(labels.Set(nsLabels)) && strings.HasPrefix(*w.ClientConfig.Service.Path, "/validate-runner-pod/") {
				out = append(out, w.Name+" "+string(*w.FailurePolicy)+" "+*w.ClientConfig.Service.Path)
			}
		}
		return out
	}
	ns := map[string]string{"runnerguard.io/enabled": "true", corev1.LabelMetadataName: "ci"}
	assert.ElementsMatch(t, []string{
		"delete.guard.runnerguard.io Fail /validate-runner-pod/enforce",
		"eviction.guard.runnerguard.io Ignore /validate-runner-pod/enforce",
	}, paths(ns), "an unlabelled namespace is in enforce")
	ns["runnerguard.io/mode"] = "warn"
	assert.ElementsMatch(t, []string{
		"delete-warn.guard.runnerguard.io Ignore /validate-runner-pod/warn",
		"eviction-warn.guard.runnerguard.io Ignore /validate-runner-pod/warn",
	}, paths(ns), "a namespace labelled warn stays in warn")
}

// The values a release's guard.rollout and presets.enabled replaced fail
// the install with what replaced them, rather than being ignored.
func TestReplacedValuesSayWhatReplacedThem(t *testing.T) {
	for _, tc := range []struct{ values, message string }{
		{"guard: {mode: enforce}", "guard.mode was replaced by guard.rollout"},
		{"presets: {gitlab: {enabled: true}}", "presets.gitlab.enabled was replaced by presets.enabled"},
	} {
		_, err := helm4(t).template(t, tc.values)
		require.Error(t, err, tc.values)
		assert.Contains(t, err.Error(), tc.message)
	}
}

// Legacy ARC without its controller's name would refuse legacy ARC's own
// scale-down until the cap: the install fails and says so.
func TestLegacyARCWithoutItsControllerFailsTheInstall(t *testing.T) {
	_, err := helm4(t).template(t, "presets: {enabled: [arc-legacy]}")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "presets.arc-legacy needs presets.arc-legacy.controllerPrincipals")
	_, err = helm4(t).template(t, "presets: {enabled: [arc-legacy], arc-legacy: {controllerPrincipals: [system:serviceaccount:arc:legacy]}}")
	assert.NoError(t, err)
}

// Only the presets whose owner ends a job by deleting its pod have owners;
// the install says so rather than the server refusing its config.
func TestOwnerPrincipalsOfOtherPresetsFailTheInstall(t *testing.T) {
	_, err := helm4(t).template(t, "presets: {generic: {ownerPrincipals: [system:serviceaccount:ci:pool]}}")
	require.Error(t, err)
	var owners []string
	for _, f := range presets.All {
		if f.Traits().Owner.EndsJob {
			owners = append(owners, string(f.Name()))
		}
	}
	assert.Contains(t, err.Error(), "presets.generic.ownerPrincipals: only the presets whose owner ends a job by deleting its pod ("+strings.Join(owners, ", ")+")", "the server's words")
}

// The chart's presets whose jobs have owners are the server's
// (fleet.Owner.EndsJob), preset by preset.
func TestTheChartsJobOwningPresetsAreTheServers(t *testing.T) {
	for _, name := range presets.Order {
		_, err := helm4(t).template(t, fmt.Sprintf("presets: {%s: {ownerPrincipals: [system:serviceaccount:ci:owner]}}", name))
		assert.Equal(t, presets.OwnerOf(name).EndsJob, err == nil, "%s: %v", name, err)
	}
}

// Only gitlab takes an owner of the runner pods' own namespace by name:
// arc-workflow's runner proves itself by its pod's token.
func TestOwnerInRunnerNamespaceOfOtherPresetsFailsTheInstall(t *testing.T) {
	_, err := helm4(t).template(t, "presets: {arc-workflow: {ownerInRunnerNamespace: true}}")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "presets.arc-workflow.ownerInRunnerNamespace: only the presets whose job's owner may run in the runner namespace (")
}

// A job key names a label or an annotation: the schema refuses both, and
// anything else, at install.
func TestAJobKeyOfBothKindsFailsTheInstall(t *testing.T) {
	_, err := helm4(t).template(t, "presets: {generic: {job: {id: {label: a, annotation: b}}}}")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/presets/generic/job/id")
	_, err = helm4(t).template(t, "presets: {generic: {job: {id: {field: a}}}}")
	require.Error(t, err)
}
