package recorder

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/runnerguard/runnerguard/internal/podtest"
)

// A budget the cache does not show yet (made a moment ago by another
// worker) is taken as in place when the API server shows it as
// runnerguard's; only another's object under its name is deleted.
func TestABudgetJustMadeIsNotTakenForASquatter(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, policyv1.AddToScheme(s))
	require.NoError(t, corev1.AddToScheme(s))
	for _, tc := range []struct {
		name        string
		live        *policyv1.PodDisruptionBudget
		inPlace     bool
		wantDeleted bool
	}{
		{"runnerguard's, just made", Budget("ci"), true, false},
		{"another's under its name", func() *policyv1.PodDisruptionBudget {
			b := Budget("ci")
			b.Labels = nil
			return b
		}(), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := fake.NewClientBuilder().WithScheme(s).WithObjects(tc.live).Build()
			deleted := false
			// The cache has not caught up: it shows no budget.
			cached := interceptor.NewClient(api, interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, ok := obj.(*policyv1.PodDisruptionBudget); ok {
						return apierrors.NewNotFound(policyv1.Resource("poddisruptionbudgets"), key.Name)
					}
					return c.Get(ctx, key, obj, opts...)
				},
				Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					deleted = true
					return c.Delete(ctx, obj, opts...)
				},
			})
			pods, err := NewPodCache(kubefake.NewClientset().CoreV1(), 0)
			require.NoError(t, err)
			m := &Marker{Pods: pods, Client: cached, Reader: api}
			inPlace, err := m.ensureBudget(context.Background(), podtest.Runner("ci", "runner-1").Obj())
			require.NoError(t, err)
			assert.Equal(t, tc.inPlace, inPlace)
			assert.Equal(t, tc.wantDeleted, deleted)
		})
	}
}
