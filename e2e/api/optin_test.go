//go:build e2e

package api

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// optInRefused is what the namespaces' policy says.
const optInRefused = `may add, change or remove the labels runnerguard.io/enabled, runnerguard.io/mode`

// clusterGrant binds the ClusterRole role to p cluster-wide and waits until
// RBAC answers for it: what is allowed.
func clusterGrant(t *testing.T, p principal, role string, what authorizationv1.ResourceAttributes) {
	t.Helper()
	ctx := context.Background()
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-" + strings.TrimPrefix(role, "system:") + "-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: p.user}},
	}
	require.NoError(t, admin.Create(ctx, crb))
	t.Cleanup(func() { _ = admin.Delete(context.Background(), crb) })
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: p.user, Groups: p.groups, ResourceAttributes: &what}}
	eventually(t, func() bool {
		got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		return err == nil && got.Status.Allowed
	}, "RBAC lets "+p.user+" "+what.Verb+" "+what.Resource)
}

// A role that may manage namespaces cluster-wide (what a namespace
// provisioner, a GitOps controller or a tenancy operator holds), and
// nothing of runnerguard's.
const namespaceManager = "e2e-namespace-manager"

func namespaceManagerRole(t *testing.T) {
	t.Helper()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: namespaceManager}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "create", "update", "patch", "delete"}},
	}}
	if err := admin.Create(context.Background(), role); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

// The labels that opt a namespace in and set its mode are changed only by
// principals granted the verb opt-in: a principal that may patch
// namespaces cannot switch a namespace to warn or out of runnerguard, so a
// busy runner's deletion there still goes to the guard. Namespace creation
// and deletion are never held, and cluster-admin's off switch still works.
func TestOnlyThoseGrantedOptInChangeANamespacesOptInAndMode(t *testing.T) {
	ctx := context.Background()
	namespaceManagerRole(t)
	manages := authorizationv1.ResourceAttributes{Verb: "update", Resource: "namespaces"}
	provisioner := person("ns-provisioner@example.com")
	clusterGrant(t, provisioner, namespaceManager, manages)
	platform := person("platform@example.com")
	clusterGrant(t, platform, namespaceManager, manages)
	optIn := server.Options().Name + "-opt-in"
	clusterGrant(t, platform, optIn, authorizationv1.ResourceAttributes{Verb: runnerpod.OptInVerb, Group: runnerpod.OverrideGroup, Resource: runnerpod.OverrideResource})
	clusterAdmin := person("root@example.com")
	clusterGrant(t, clusterAdmin, "cluster-admin", manages)

	patchLabels := func(c client.Client, ns string, labels map[string]any) error {
		return patchMeta(c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, map[string]any{"labels": labels})
	}
	cases := []struct {
		name    string
		labels  map[string]string
		by      principal
		change  map[string]any
		refused bool
	}{
		{"a namespace manager cannot remove the opt-in label", nil, provisioner, map[string]any{runnerpod.EnabledNamespaceLabel: nil}, true},
		{"nor set it to anything but true", nil, provisioner, map[string]any{runnerpod.EnabledNamespaceLabel: "false"}, true},
		{"nor switch the namespace to warn", nil, provisioner, map[string]any{runnerpod.ModeLabel: "warn"}, true},
		{"nor from enforce to warn", map[string]string{runnerpod.ModeLabel: "enforce"}, provisioner, map[string]any{runnerpod.ModeLabel: "warn"}, true},
		{"nor remove the mode label", map[string]string{runnerpod.ModeLabel: "enforce"}, provisioner, map[string]any{runnerpod.ModeLabel: nil}, true},
		{"a namespace manager may change other labels", nil, provisioner, map[string]any{"team": "ci"}, false},
		{"a principal granted opt-in switches the namespace to warn", nil, platform, map[string]any{runnerpod.ModeLabel: "warn"}, false},
		{"and removes the opt-in label", nil, platform, map[string]any{runnerpod.EnabledNamespaceLabel: nil}, false},
		{"cluster-admin's off switch: removing the label", nil, clusterAdmin, map[string]any{runnerpod.EnabledNamespaceLabel: nil}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t, tc.labels)
			err := patchLabels(tc.by.client(t), ns, tc.change)
			if !tc.refused {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.True(t, apierrors.IsForbidden(err), "403, not %v", err)
			assert.Contains(t, err.Error(), refusedBy(server.Options().Name+"-namespaces"))
			assert.Contains(t, err.Error(), optInRefused)
		})
	}

	t.Run("nor can a principal that may only write a namespace's finalize or status", func(t *testing.T) {
		// Namespace-cleanup tools and tenancy controllers' status writers
		// hold these; both subresources' strategies keep the request's
		// metadata, labels included.
		subresources := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-namespace-subresources"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"namespaces/finalize", "namespaces/status"}, Verbs: []string{"update"}},
		}}
		if err := admin.Create(ctx, subresources); err != nil && !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
		cleaner := person("ns-cleaner@example.com")
		clusterGrant(t, cleaner, subresources.Name, authorizationv1.ResourceAttributes{Verb: "update", Resource: "namespaces", Subresource: "finalize"})
		ns := newNamespace(t, map[string]string{runnerpod.ModeLabel: "enforce"})
		for _, change := range []map[string]*string{
			{runnerpod.EnabledNamespaceLabel: nil}, {runnerpod.ModeLabel: ptr.To("warn")},
		} {
			got := &corev1.Namespace{}
			require.NoError(t, admin.Get(ctx, client.ObjectKey{Name: ns}, got))
			for k, v := range change {
				if v == nil {
					delete(got.Labels, k)
				} else {
					got.Labels[k] = *v
				}
			}
			err := cleaner.client(t).Status().Update(ctx, got.DeepCopy())
			require.Error(t, err, "through namespaces/status: %v", change)
			assert.Contains(t, err.Error(), optInRefused)
			_, err = kubernetes.NewForConfigOrDie(impersonated(cleaner)).CoreV1().Namespaces().Finalize(ctx, got.DeepCopy(), metav1.UpdateOptions{})
			require.Error(t, err, "through namespaces/finalize: %v", change)
			assert.Contains(t, err.Error(), optInRefused)
		}
		got := &corev1.Namespace{}
		require.NoError(t, admin.Get(ctx, client.ObjectKey{Name: ns}, got))
		assert.Equal(t, "true", got.Labels[runnerpod.EnabledNamespaceLabel])
		assert.Equal(t, "enforce", got.Labels[runnerpod.ModeLabel])
		// Its own work, labels as read, passes.
		got.Spec.Finalizers = append(got.Spec.Finalizers, "e2e.example.com/cleanup")
		_, err := kubernetes.NewForConfigOrDie(impersonated(cleaner)).CoreV1().Namespaces().Finalize(ctx, got, metav1.UpdateOptions{})
		require.NoError(t, err, "a finalize that keeps the labels passes")
	})
	t.Run("a namespace manager cannot opt a namespace in after the fact either", func(t *testing.T) {
		ns := plainNamespace(t, nil)
		err := patchLabels(provisioner.client(t), ns, map[string]any{runnerpod.EnabledNamespaceLabel: "true"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), optInRefused)
	})
	t.Run("a namespace manager creates a namespace opted in: it has no runner to lose", func(t *testing.T) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e-new-" + strings.ToLower(rand.String(6)),
			Labels: map[string]string{runnerpod.EnabledNamespaceLabel: "true", runnerpod.ModeLabel: "warn"}}}
		require.NoError(t, provisioner.client(t).Create(ctx, ns))
		t.Cleanup(func() { _ = admin.Delete(context.Background(), ns) })
	})
	t.Run("a namespace manager deletes an opted-in namespace with a busy runner", func(t *testing.T) {
		ns := newNamespace(t, nil)
		create(t, nil, running(podtest.Runner(ns, "busy"), "runner"))
		require.NoError(t, provisioner.client(t).Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
		got := &corev1.Namespace{}
		require.NoError(t, admin.Get(ctx, client.ObjectKey{Name: ns}, got))
		assert.NotNil(t, got.DeletionTimestamp, "the namespace is being deleted")
		// The namespace controller's finalize and status writes are not
		// reviewed (envtest runs no namespace controller: play its status
		// write as it would).
		got.Status.Phase = corev1.NamespaceTerminating
		require.NoError(t, admin.Status().Update(ctx, got))
	})
}

// An override written before a namespace opted in would be honoured from
// the moment it does: the override's policy applies in every namespace the
// webhooks could ever select, so nobody without the override permission
// can have set one anywhere.
func TestAnOverrideCannotBeWrittenBeforeTheNamespaceOptsIn(t *testing.T) {
	ctx := context.Background()
	ns := plainNamespace(t, nil)
	reaperSA := may(t, ns, serviceAccount(reaper), "edit")
	operator := may(t, ns, person("olga@example.com"), "edit")
	mayOverride(t, ns, operator)

	t.Run("a reaper with edit cannot set it on a runner pod in a namespace not opted in", func(t *testing.T) {
		pod := create(t, nil, running(podtest.Runner(ns, "later"), "runner"))
		requireRefusedByPolicy(t, patchMeta(reaperSA.client(t), pod, annotations(runnerpod.AllowDelete, "set early")), overrideRefused)
	})
	t.Run("nor create a runner pod that carries one", func(t *testing.T) {
		pod := podtest.Runner(ns, "born-overridden").Annotate(runnerpod.AllowDelete, "set early").Obj()
		pod.UID = ""
		requireRefusedByPolicy(t, reaperSA.client(t).Create(ctx, pod), overrideRefused)
	})
	t.Run("an operator granted the override may, and it holds after the opt-in", func(t *testing.T) {
		pod := create(t, nil, running(podtest.Runner(ns, "drained"), "runner"))
		require.NoError(t, patchMeta(operator.client(t), pod, annotations(runnerpod.AllowDelete, "node pool upgrade")))
	})
	t.Run("a pod that is no runner is not the policy's", func(t *testing.T) {
		pod := create(t, nil, podtest.Plain(ns, "web").Obj())
		require.NoError(t, patchMeta(reaperSA.client(t), pod, annotations(runnerpod.AllowDelete, "whatever")))
	})
}
