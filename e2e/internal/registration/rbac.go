package registration

import (
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
)

// RBAC is what the chart grants runnerguard's ServiceAccount for a release,
// and the role it offers a metrics scraper: the suites bind these, not a
// copy, so a permission the chart forgets fails a suite.
type RBAC struct {
	// Cluster is the webhooks' and the leader's ClusterRole.
	Cluster *rbacv1.ClusterRole
	// Namespaced are the Roles in the release namespace: leader election
	// and the reporter's Secrets.
	Namespaced []*rbacv1.Role
	// MetricsReader is the ClusterRole a scraper is bound to.
	MetricsReader *rbacv1.ClusterRole
}

// ReportSecrets name the reporter's Secrets: RenderRBAC turns on every
// destination, each with its Secret, so the roles hold what a reporter
// needs.
type ReportSecrets struct {
	GitHub, GitLab, Buildkite, Sink string
}

// RenderRBAC renders the chart's roles for o's release with the pod watcher,
// secure metrics, the fleets and every report destination on: the most the
// chart ever grants runnerguard, as a suite that runs each of them needs.
func RenderRBAC(o Options, secrets ReportSecrets) (*RBAC, error) {
	if o.ReleaseNamespace == "" {
		o.ReleaseNamespace = "runnerguard"
	}
	vals := map[string]any{
		"watcher": map[string]any{"enabled": true},
		"metrics": map[string]any{"enabled": true, "secure": true},
		// Every fleet a release can name without settings of its own:
		// a fleet's own objects are read only where it is on.
		"presets": map[string]any{"enabled": []string{"arc-scale-set", "arc-workflow", "gitlab", "tekton", "buildkite", "woodpecker", "jenkins", "generic"}},
		"reports": map[string]any{
			"github": map[string]any{"enabled": true, "appID": 1, "installationID": 1, "secret": secrets.GitHub,
				"controllers": []string{"system:serviceaccount:arc-systems:arc-gha-rs-controller"}},
			"gitlab":    map[string]any{"enabled": true, "secret": secrets.GitLab},
			"buildkite": map[string]any{"enabled": true, "secret": secrets.Buildkite},
			"sinks":     []any{map[string]any{"name": "sink", "url": "https://sink.invalid/", "secret": secrets.Sink}},
		},
	}
	docs, err := template(o, vals)
	if err != nil {
		return nil, err
	}
	full := fullname(o.Name)
	var r RBAC
	if err := docs.get("ClusterRole", full, &r.Cluster); err != nil {
		return nil, err
	}
	if err := docs.get("ClusterRole", full+"-metrics-reader", &r.MetricsReader); err != nil {
		return nil, err
	}
	for _, name := range []string{full + "-leader-election", full + "-reports"} {
		var role *rbacv1.Role
		if err := docs.get("Role", name, &role); err != nil {
			return nil, err
		}
		if role.Namespace != o.ReleaseNamespace {
			return nil, fmt.Errorf("the chart renders Role %s in %q, not the release namespace %q", name, role.Namespace, o.ReleaseNamespace)
		}
		r.Namespaced = append(r.Namespaced, role)
	}
	return &r, nil
}
