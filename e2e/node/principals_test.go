//go:build node

package node

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// principal is a username and its groups, acting with only the RBAC bound
// to it, never as system:masters: the API server's RBAC, the chart's
// policy (its authorizer check of the override) and the connect webhook's
// matchConditions answer as they would in a real cluster.
type principal struct {
	user   string
	groups []string
}

// serviceAccount is the principal of a ServiceAccount's token.
func serviceAccount(username string) principal {
	ns := strings.Split(username, ":")[2]
	return principal{username, []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
}

// client acts as p.
func (p principal) client(t *testing.T) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(adminCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: p.user, Groups: p.groups}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	require.NoError(t, err)
	return c
}

// kubectl runs the cluster's kubectl as p and returns its combined output.
func (p principal) kubectl(args ...string) (string, error) {
	flags := []string{"--kubeconfig=" + kubeconfigPath, "--as=" + p.user}
	for _, g := range p.groups {
		flags = append(flags, "--as-group="+g)
	}
	out, err := exec.Command(kubectlBin, append(flags, args...)...).CombinedOutput()
	return string(out), err
}

// withEdit binds the built-in ClusterRole edit to p in ns, as a namespace's
// editors are granted it, and waits until RBAC lets p exec into pods and
// patch them there.
func withEdit(t *testing.T, ns string, p principal) principal {
	t.Helper()
	ctx := context.Background()
	parts := strings.Split(p.user, ":")
	require.True(t, len(parts) == 4 && parts[1] == "serviceaccount", "a ServiceAccount's username: %s", p.user)
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "edit-", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: parts[2], Name: parts[3]}},
	}
	require.NoError(t, admin.Create(ctx, rb))
	for _, what := range []authorizationv1.ResourceAttributes{
		{Namespace: ns, Verb: "create", Resource: "pods", Subresource: "exec"},
		{Namespace: ns, Verb: "patch", Resource: "pods"},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: p.user, Groups: p.groups, ResourceAttributes: &what,
		}}
		require.Eventually(t, func() bool {
			got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
			return err == nil && got.Status.Allowed
		}, 30*time.Second, 250*time.Millisecond, "%s", fmt.Sprintf("RBAC lets %s %s %s/%s in %s", p.user, what.Verb, what.Resource, what.Subresource, ns))
	}
	return p
}
