// Package namespace reads what runnerguard needs of a namespace: its labels
// (opt-in, mode, Pod Security level), as metadata only, so that the
// manager's cache keeps namespaces' metadata and nothing more.
package namespace

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Labels are the labels of namespace name, read through cached; a namespace
// the cache has not seen yet (NotFound) is read through live when live is
// not nil. The error is the read's, NotFound included.
func Labels(ctx context.Context, cached, live client.Reader, name string) (map[string]string, error) {
	ns := Meta()
	err := cached.Get(ctx, client.ObjectKey{Name: name}, ns)
	if apierrors.IsNotFound(err) && live != nil {
		err = live.Get(ctx, client.ObjectKey{Name: name}, ns)
	}
	return ns.Labels, err
}

// Meta is an empty namespace's metadata, the form every namespace read and
// the manager's metadata informer of namespaces share.
func Meta() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	return m
}
