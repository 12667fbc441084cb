package fleet

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

func TestLabel(t *testing.T) {
	uidChanged := apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "r",
		field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), "other", "field is immutable")})
	cases := map[string]struct {
		patchErr error
		wantErr  bool
		labelled bool
	}{
		"an unlabelled pod gets the label":                         {labelled: true},
		"a pod gone meanwhile needs none":                          {patchErr: apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "r")},
		"a pod replaced under its name is not labelled by mistake": {patchErr: uidChanged},
		"any other failure is said":                                {patchErr: apierrors.NewServiceUnavailable("etcd is busy"), wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := podtest.Runner("ci", "r").Running("runner").Obj()
			delete(pod.Labels, runnerpod.RunnerLabel)
			c := interceptor.NewClient(fake.NewClientBuilder().WithObjects(pod.DeepCopy()).Build(), interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if tc.patchErr != nil {
						return tc.patchErr
					}
					return c.Patch(ctx, obj, patch, opts...)
				},
			})
			err := Label(context.Background(), c, pod)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			got := &corev1.Pod{}
			require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(pod), got))
			_, ok := got.Labels[runnerpod.RunnerLabel]
			assert.Equal(t, tc.labelled, ok)
		})
	}
}
