package guard

import (
	"context"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/deletion"
	"github.com/runnerguard/runnerguard/internal/namespace"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Anyone on the pod network can post a review to the guard: the webhook
// server cannot tell the API server's from another's. What the guard checks
// itself before it writes a note, a label, an Event or a metric about one:
// that it names a requester (the API server always does), that its pod is
// in a namespace the webhooks are registered for (the API server sends no
// other), that the pod exists with the review's UID and is not already
// terminating (confirm), and, for an allowed deletion's note and Event,
// that the pod's deletion follows (deletionShows). What it cannot check (that a review naming a real pod in
// a selected namespace, before its real deletion, was the API server's) the
// chart's NetworkPolicy narrows to the peers allowed to reach the webhook.

// notActedOn is the log message of a review the guard answered but wrote
// nothing about.
const notActedOn = "review not acted on"

// neverSelected are the cluster's own namespaces, which no registration of
// runnerguard selects whatever its selector says.
var neverSelected = []string{"kube-system", "kube-public", "kube-node-lease"}

// unsent says why the API server cannot have sent the review of f, or ""
// when it may have.
func (h *Handler) unsent(ctx context.Context, f Facts) string {
	if f.Requester == "" {
		return "the review names no requester"
	}
	ns := f.Pod.Namespace
	if ns == "" || slices.Contains(neverSelected, ns) {
		return "the pod is in no namespace runnerguard guards"
	}
	if h.Selected == nil {
		return ""
	}
	if h.Namespaces == nil {
		return "the namespace cannot be read"
	}
	meta := namespace.Meta()
	if err := h.Namespaces.Get(ctx, client.ObjectKey{Name: ns}, meta); err != nil {
		return "the namespace cannot be read: " + err.Error()
	}
	if !h.Selected.Matches(labels.Set(meta.Labels)) {
		return "the pod is in no namespace runnerguard guards"
	}
	return ""
}

// deleted reports whether the deletion n tells of has happened: the pod is
// terminating, or gone (the API server removes a pod deleted with no grace
// at once), or replaced by another of its name. Read from the runner pods'
// metadata cache, or from the API server for a pod the cache does not hold
// (one the guard has just labelled).
func (h *Handler) deleted(ctx context.Context, key client.ObjectKey, uid string) (bool, error) {
	meta := runnerpod.Meta()
	err := h.Pods.Get(ctx, key, meta)
	if apierrors.IsNotFound(err) {
		meta = runnerpod.Meta()
		err = h.Reader.Get(ctx, key, meta)
	}
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, err
	}
	return string(meta.UID) != uid || meta.DeletionTimestamp != nil, nil
}

// podDeleted is the readiness of n's note (deletionShows).
func (h *Handler) podDeleted(n *v1alpha1.RunnerDeletion) func(context.Context) bool {
	return h.deletionShows(client.ObjectKey{Namespace: n.Namespace, Name: n.Deletion.Pod}, n.Deletion.UID)
}

// deletionShows polls deleted until the deletion of the pod key with uid
// shows, for as long as the recorder waits for a note. Without the runner
// pods' cache, or unless Register asked for it, nil: nothing waits.
func (h *Handler) deletionShows(key client.ObjectKey, uid string) func(context.Context) bool {
	if h.Pods == nil || !h.NotesAfterDeletion {
		return nil
	}
	return func(ctx context.Context) bool {
		wctx, cancel := context.WithTimeout(ctx, deletion.NoteWait)
		defer cancel()
		return wait.PollUntilContextCancel(wctx, deletion.RetryEvery, true, func(ctx context.Context) (bool, error) {
			done, err := h.deleted(ctx, key, uid)
			return done && err == nil, nil
		}) == nil
	}
}

// confirm reports whether the review's pod exists with the review's UID:
// in the cache of runner pods, or else read from the API server, unless it
// was seen there already (seen). A review posted by anyone but the API server
// names a pod that does not exist, or not with that UID, or is replayed
// after it went, or after its deletion began (the API server sends no
// review of a terminating pod, so one that came after the deletion cannot
// claim it): then the guard writes nothing about it. The cache (the
// runner pods' metadata, names and UIDs only, on every replica) is as good a
// witness as a GET (either says only that the pod exists with that UID) and
// spares a request per reviewed delete (a GitLab job end costs a note, a
// record and an Event, not a GET besides); a pod the cache has not seen
// yet, or has dropped, is read from the API server.
func (h *Handler) confirm(ctx context.Context, f Facts, seen witness) (bool, error) {
	if seen.confirmed || seen.refuted {
		return seen.confirmed, nil
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
