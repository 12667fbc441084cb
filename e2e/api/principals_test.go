//go:build e2e

package api

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/internal/registration"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/fleet/arclegacy"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	genericfleet "github.com/runnerguard/runnerguard/internal/fleet/generic"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// The fleets' controllers the suite trusts with their fields; legacy ARC's
// is arclegacy.Controller, which no default trusts. ARC's
// kubernetes-mode runner (workflowRunner) is a ServiceAccount of the
// runner namespace, which edit there can wear: trusted with nothing, as
// the docs advise.
const (
	arcController  = "system:serviceaccount:arc-systems:arc-gha-rs-controller"
	workflowRunner = "system:serviceaccount:arc-runners:arc-runner-kube-mode"
	poolController = "system:serviceaccount:pool-system:pool-controller"
)

// trustControllers configures the fleets' controllers, as an operator
// would in presets.*.controllerPrincipals, naming only controllers that
// run in a namespace of their own.
func trustControllers(cfg *config.Config) {
	for i, p := range cfg.Presets {
		switch p.Name {
		case arcscaleset.Name:
			cfg.Presets[i].ControllerPrincipals = []string{arcController}
		case arclegacy.Name:
			cfg.Presets[i].ControllerPrincipals = []string{arclegacy.Controller}
		case genericfleet.Name:
			cfg.Presets[i].ControllerPrincipals = []string{poolController}
		}
	}
}

// policyDenied starts every refusal of the policy the suite registers.
func policyDenied() string {
	name := server.Options().Name
	return fmt.Sprintf("ValidatingAdmissionPolicy '%s' with binding '%s' denied request: ", name, name)
}

// registerPolicy installs the policy, its binding and the override
// ClusterRole as the chart ships them, and waits until the API server
// enforces the binding (a binding takes effect a moment after it is
// created).
func registerPolicy(ctx context.Context) error {
	objs, err := registration.Render(suiteCfg, server.Options())
	if err != nil {
		return err
	}
	registered := objs.PolicyObjects()
	if creatorPolicyServed() {
		registered = append(registered, objs.CreatorObjects()...)
	}
	for _, obj := range registered {
		if err := admin.Create(ctx, obj); err != nil {
			return fmt.Errorf("registering %s: %w", obj.GetName(), err)
		}
	}
	if err := aggregateBuiltInRoles(ctx); err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "policy-probe", Labels: map[string]string{runnerpod.EnabledNamespaceLabel: "true"}}}
	plain := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "policy-probe-plain"}}
	for _, n := range []*corev1.Namespace{ns, plain} {
		if err := admin.Create(ctx, n); err != nil {
			return err
		}
	}
	// A runner pod whose recorded creator someone rewrites, which not even
	// cluster-admin may (at CREATE the injector overwrites a forged one
	// before the policy sees it).
	probe := podtest.Runner(ns.Name, "probe").Obj()
	probe.UID = ""
	if err := admin.Create(ctx, probe); err != nil {
		return err
	}
	rewrite := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+runnerpod.CreatedBy+`":"somebody-else"}}}`))
	// The override's and the namespaces' policies refuse only principals
	// without their permissions, which the admin holds: a probe principal
	// that may create pods and update namespaces, and no more, asks.
	prober, err := policyProber(ctx)
	if err != nil {
		return err
	}
	overridden := podtest.Runner(plain.Name, "probe").Annotate(runnerpod.AllowDelete, "probe").Obj()
	overridden.UID = ""
	// A node whose drain deadline names no setter.
	unnamedDeadline := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "policy-probe", Annotations: map[string]string{runnerpod.DrainDeadline: "2026-11-28T06:00:00Z"}}}
	optIn := plain.DeepCopy()
	optIn.Labels = map[string]string{runnerpod.EnabledNamespaceLabel: "true"}
	for _, p := range []struct {
		policy string
		try    func() error
	}{
		{policyDenied(), func() error { return admin.Patch(ctx, probe.DeepCopy(), rewrite, client.DryRunAll) }},
		{refusedBy(objs.OverridePolicy.Name), func() error { return prober.Create(ctx, overridden.DeepCopy(), client.DryRunAll) }},
		{refusedBy(objs.NamespacePolicy.Name), func() error { return prober.Update(ctx, optIn.DeepCopy(), client.DryRunAll) }},
		{refusedBy(objs.NodePolicy.Name), func() error { return admin.Create(ctx, unnamedDeadline.DeepCopy(), client.DryRunAll) }},
	} {
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			err := p.try()
			return err != nil && strings.Contains(err.Error(), p.policy), nil
		}); err != nil {
			return fmt.Errorf("waiting for %q: %w", p.policy, err)
		}
	}
	return nil
}

// refusedBy starts every refusal of the chart's policy named name, bound
// by its binding of the same name.
func refusedBy(name string) string {
	return fmt.Sprintf("ValidatingAdmissionPolicy '%s' with binding '%s' denied request: ", name, name)
}

// policyProber is a client for a principal that may create pods and
// update namespaces anywhere, and holds neither the override nor the
// opt-in permission.
func policyProber(ctx context.Context) (client.Client, error) {
	const user = "policy-probe@example.com"
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-policy-probe"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "update"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	for _, obj := range []client.Object{role, binding} {
		if err := admin.Create(ctx, obj); err != nil {
			return nil, err
		}
	}
	cfg := rest.CopyConfig(adminCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	cfg.WarningHandler = rest.NoWarnings{}
	return client.New(cfg, client.Options{Scheme: scheme.Scheme})
}

// aggregateBuiltInRoles does what kube-controller-manager's
// clusterrole-aggregation controller does, which envtest does not run: the
// built-in admin, edit and view roles get the rules of the roles their
// aggregationRule selects, so the test principals hold exactly what those
// roles hold in a real cluster. Aggregation is transitive (view into edit,
// edit into admin), so it runs until it settles: three passes.
func aggregateBuiltInRoles(ctx context.Context) error {
	for range 3 {
		if err := aggregateOnce(ctx); err != nil {
			return err
		}
	}
	return nil
}

func aggregateOnce(ctx context.Context) error {
	var all rbacv1.ClusterRoleList
	if err := admin.List(ctx, &all); err != nil {
		return err
	}
	for i := range all.Items {
		role := &all.Items[i]
		if role.AggregationRule == nil {
			continue
		}
		role.Rules = nil
		for _, sel := range role.AggregationRule.ClusterRoleSelectors {
			var parts rbacv1.ClusterRoleList
			s, err := metav1.LabelSelectorAsSelector(&sel)
			if err != nil {
				return err
			}
			if err := admin.List(ctx, &parts, client.MatchingLabelsSelector{Selector: s}); err != nil {
				return err
			}
			for _, p := range parts.Items {
				if p.Name != role.Name {
					role.Rules = append(role.Rules, p.Rules...)
				}
			}
		}
		if err := admin.Update(ctx, role); err != nil {
			return fmt.Errorf("aggregating %s: %w", role.Name, err)
		}
	}
	return nil
}

// A principal: a username and its groups, acting with only the RBAC bound
// to it, never as system:masters, so the policy's authorizer check and the
// API server's RBAC answer as they would in a real cluster.
type principal struct {
	user   string
	groups []string
}

func serviceAccount(username string) principal {
	ns := strings.Split(username, ":")[2]
	return principal{username, []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
}

func person(name string) principal { return principal{name, []string{"system:authenticated"}} }

// client acts as p.
func (p principal) client(t *testing.T) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(adminCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: p.user, Groups: p.groups}
	cfg.WarningHandler = rest.NoWarnings{}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	require.NoError(t, err)
	return c
}

// Roles a test binds besides the built-in ones.
const (
	podPatcher   = "e2e-pod-patcher"   // a CI job's service account that manages pods
	statusWriter = "e2e-status-writer" // what a kubelet may do to a pod's status
	// ephemeralRunnerWriter is what ARC's listener role may do to
	// EphemeralRunners (its chart grants patch and update).
	ephemeralRunnerWriter = "e2e-ephemeralrunner-writer"
)

func testRoles() []*rbacv1.ClusterRole {
	return []*rbacv1.ClusterRole{
		{ObjectMeta: metav1.ObjectMeta{Name: podPatcher}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "create", "update", "patch"}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: ephemeralRunnerWriter}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"actions.github.com"}, Resources: []string{"ephemeralrunners", "ephemeralrunners/status"}, Verbs: []string{"get", "list", "update", "patch"}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: statusWriter}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"update", "patch"}},
		}},
	}
}

// grant binds the ClusterRole role to p in ns and waits until RBAC answers
// for it: what is allowed.
func grant(t *testing.T, ns string, p principal, role string, what authorizationv1.ResourceAttributes) {
	t.Helper()
	ctx := context.Background()
	for _, r := range testRoles() {
		if err := admin.Create(ctx, r); err != nil && !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
	subject := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: p.user}
	if strings.HasPrefix(p.user, "system:serviceaccount:") {
		parts := strings.Split(p.user, ":")
		subject = rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: parts[2], Name: parts[3]}
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: role + "-", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{subject},
	}
	require.NoError(t, admin.Create(ctx, rb))
	what.Namespace = ns
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: p.user, Groups: p.groups,
		ResourceAttributes: &what,
	}}
	eventually(t, func() bool {
		got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		return err == nil && got.Status.Allowed
	}, fmt.Sprintf("RBAC lets %s %s %s in %s", p.user, what.Verb, what.Resource, ns))
}

// may grants p the role, waiting until it may patch pods.
func may(t *testing.T, ns string, p principal, role string) principal {
	t.Helper()
	grant(t, ns, p, role, authorizationv1.ResourceAttributes{Verb: "patch", Resource: "pods"})
	return p
}

// mayOverride grants p the chart's override ClusterRole in ns.
func mayOverride(t *testing.T, ns string, p principal) {
	t.Helper()
	grant(t, ns, p, server.Options().Name+"-override", authorizationv1.ResourceAttributes{
		Verb: runnerpod.OverrideVerb, Group: runnerpod.OverrideGroup, Resource: runnerpod.OverrideResource,
	})
}

// creatorPolicyServed reports whether the API server serves
// MutatingAdmissionPolicy (GA in 1.36), which records the creator
// (inject.creatorPolicy).
func creatorPolicyServed() bool {
	rs, err := cs.Discovery().ServerResourcesForGroupVersion("admissionregistration.k8s.io/v1")
	return err == nil && slices.ContainsFunc(rs.APIResources, func(r metav1.APIResource) bool { return r.Kind == "MutatingAdmissionPolicy" })
}
