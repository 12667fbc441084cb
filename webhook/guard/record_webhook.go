package guard

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/deletion"
	"github.com/runnerguard/runnerguard/internal/fleet"
)

// The deletion of a fleet's record of a runner (ARC's EphemeralRunner)
// ends its runner only later: ARC waits until the Actions service accepts
// the runner's removal, then deletes the pod itself. The guard notes who
// asked for the record to go, so the pod's deletion, requested by the
// fleet, names who started it. It never refuses one: the deletion ends no
// job by itself.

// RecordPath is where the webhook server serves the reviews of the
// deletes of a fleet's records of kind: the chart's fleet table names the
// same path (templates/webhooks.yaml).
func RecordPath(kind string) string { return "/note-" + strings.ToLower(kind) + "-delete" }

// RecordHandler is the room of the deletes of one fleet's records: it
// allows each and notes who asked (recordDeleted), never refusing one.
type RecordHandler struct {
	Keeper fleet.RecordKeeper
	// Reader reads the record, uncached, for its deletion to show.
	Reader client.Reader
	// Notes writes the notes; nil: nothing is noted (no pod watcher reads
	// them).
	Notes *deletion.Notes
	Now   func() time.Time
	// after is the pod guard's pool, for Handle (after.go).
	after *afterAnswer
}

// Records returns the handler of the deletes of k's records, reading and
// noting as h does.
func (h *Handler) Records(k fleet.RecordKeeper) RecordHandler {
	e := RecordHandler{Keeper: k, Reader: h.Reader, Now: h.Now, after: h.after}
	if h.Writer != nil {
		e.Notes = h.Notes
	}
	return e
}

// Handle judges one review, and hands what follows its answer to the
// pool: the admission.Handler around Review.
func (e RecordHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	return e.after.handler(e.Review).Handle(ctx, req)
}

// Review allows a record's deletion and notes it (recordDeleted); any
// other review is allowed untouched.
func (e RecordHandler) Review(ctx context.Context, req admission.Request) (admission.Response, After) {
	gvr := e.Keeper.RecordResource()
	if req.Operation != admissionv1.Delete || req.SubResource != "" || req.Resource.Group != gvr.Group || req.Resource.Resource != gvr.Resource {
		return admission.Allowed("runnerguard notes only deletes of " + e.kind() + "s here"), nil
	}
	return e.recordDeleted(ctx, req)
}

func (e RecordHandler) kind() string { return e.Keeper.Traits().RecordKind }

// recordDeleted allows the deletion and, unless it is a dry run or a
// repeat, notes its requester once the record shows it is being deleted:
// a review the API server did not send names a record that is not being
// deleted, and writes nothing.
func (e RecordHandler) recordDeleted(ctx context.Context, req admission.Request) (admission.Response, After) {
	allowed := admission.Allowed("runnerguard notes who deleted the " + e.kind())
	rec := &metav1.PartialObjectMetadata{}
	if len(req.OldObject.Raw) == 0 || json.Unmarshal(req.OldObject.Raw, rec) != nil || rec.UID == "" {
		return allowed, nil
	}
	dryRun := req.DryRun != nil && *req.DryRun
	if dryRun || rec.DeletionTimestamp != nil || e.Notes == nil {
		return allowed, nil
	}
	n := &v1alpha1.RunnerDeletion{
		ObjectMeta: metav1.ObjectMeta{Namespace: rec.Namespace, Name: string(rec.UID)},
		Deletion: v1alpha1.DeletionNote{
			Kind: e.kind(), Pod: e.Keeper.RecordPod(rec).Name, UID: string(rec.UID),
			Requester: req.UserInfo.Username, Operation: string(Delete), Time: metav1.NewTime(e.Now()),
			Job: e.jobOf(req.OldObject.Raw),
		},
	}
	logf.FromContext(ctx).V(1).Info("deletion of a fleet's record reviewed", "kind", e.kind(), "record", rec.Namespace+"/"+rec.Name, "requester", req.UserInfo.Username)
	// The note follows the answer, as the pod guard's effects do: the
	// record's deletion shows only once it is answered.
	return allowed, func(ctx context.Context) {
		e.Notes.Write(ctx, n, func(ctx context.Context) bool { return e.recordDeleting(ctx, rec) })
	}
}

// recordDeleting waits until the record reviewed shows a deletion under
// way with its UID: the API server marks it just after the guard
// answered. A record without finalizers is gone at once, and then there is
// no pod of it for the fleet to delete later.
func (e RecordHandler) recordDeleting(ctx context.Context, rec *metav1.PartialObjectMetadata) bool {
	ctx, cancel := context.WithTimeout(ctx, deletion.OwnerNoteWait)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, deletion.RetryEvery, true, func(ctx context.Context) (bool, error) {
		live := &metav1.PartialObjectMetadata{}
		live.SetGroupVersionKind(e.Keeper.RecordResource().GroupVersion().WithKind(e.kind()))
		if err := e.Reader.Get(ctx, client.ObjectKey{Namespace: rec.Namespace, Name: rec.Name}, live); err != nil {
			if apierrors.IsNotFound(err) {
				return false, err
			}
			return false, nil
		}
		return live.UID == rec.UID && live.DeletionTimestamp != nil, nil
	})
	return err == nil
}

// jobOf is the job the deleted record names, kept on the note: ARC
// deletes the EphemeralRunner of a runner that ended, then the pod, and the
// death record written after names the job from the note.
func (e RecordHandler) jobOf(raw []byte) *v1alpha1.Job {
	rec := &unstructured.Unstructured{}
	if rec.UnmarshalJSON(raw) != nil {
		return nil
	}
	return e.Keeper.RecordJob(rec)
}
