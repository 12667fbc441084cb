package recorder

import (
	"context"
	"errors"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// source is the records' changes, from whichever informer runs, each as a
// request for the runner pod the record stands for (fleet.RecordKeeper's
// RecordPod; the marker checks the pod's reference to it by UID). The controller starts its workers once the first check is done
// and, if the EphemeralRunners are served, their informer has synced.
func (e *Records) source() source.Source {
	h := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: e.keeper.RecordPod(o)}}
	})
	return followingSource{Source: source.Channel(e.events, h), e: e}
}

type followingSource struct {
	source.Source
	e *Records
}

func (s followingSource) WaitForSync(ctx context.Context) error {
	select {
	case <-s.e.checked:
	case <-ctx.Done():
		return errors.New("the first check of the fleet's records did not come")
	}
	if inf := s.e.current(); inf != nil && !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return errors.New("the informer of the fleet's records did not sync")
	}
	return nil
}
