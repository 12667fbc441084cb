package guard

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// confirm reports whether the review's pod exists with the review's UID:
// in the cache of runner pods, or else read from the API server, unless it
// was just read from there. A review posted by anyone but the API server
// names a pod that does not exist, or not with that UID, or is replayed
// after it went, or after its deletion began (the API server sends no
// review of a terminating pod, so one that came after the deletion cannot
// claim it): then the guard writes nothing about it. The cache (the
// runner pods' metadata, names and UIDs only, on every replica) is as good a
// witness as a GET (either says only that the pod exists with that UID) and
// spares a request per reviewed delete (a GitLab job end costs a note, a
// record and an Event, not a GET besides); a pod the cache has not seen
// yet, or has dropped, is read from the API server.
func (h *Handler) confirm(ctx context.Context, f Facts) (bool, error) {
	if f.confirmed || f.refuted {
		return f.confirmed, nil
	}
	key := client.ObjectKeyFromObject(f.Pod)
	if h.Pods != nil {
		cached := runnerpod.Meta()
		if err := h.Pods.Get(ctx, key, cached); err == nil && cached.UID == f.Pod.UID && cached.UID != "" {
			return cached.DeletionTimestamp == nil, nil
		}
	}
	live := runnerpod.Meta()
	if err := h.Reader.Get(ctx, key, live); err != nil {
		return false, err
	}
	return live.UID == f.Pod.UID && live.UID != "" && live.DeletionTimestamp == nil, nil
}
