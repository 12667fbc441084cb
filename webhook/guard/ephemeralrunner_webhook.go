package guard

import (
	"context"
	"encoding/json"
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
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
)

// An EphemeralRunner's deletion ends its runner only later: ARC waits until
// the Actions service accepts the runner's removal, then deletes the pod
// itself. The guard notes who asked for the EphemeralRunner to go, so the
// pod's deletion, requested by ARC, names who started it. It never refuses
// one: the deletion ends no job by itself.

// EphemeralRunnerPath is where the webhook server serves the reviews of
// EphemeralRunner deletes. (The pod guard's paths hand such a review here
// too, for a registration that names them.)
const EphemeralRunnerPath = "/note-ephemeralrunner-delete"

// EphemeralRunnerHandler is the room of EphemeralRunner deletes: it allows
// each and notes who asked (ephemeralRunnerDeleted), never refusing one.
type EphemeralRunnerHandler struct {
	// Reader reads the EphemeralRunner, uncached, for its deletion to show.
	Reader client.Reader
	// Notes writes the notes; nil: nothing is noted (no pod watcher reads
	// them).
	Notes *deletion.Notes
	Now   func() time.Time
	// after runs the note once the answer is sent (the pod guard's pool,
	// after.go).
	after *afterAnswer
}

// EphemeralRunners returns the handler of EphemeralRunner deletes, reading
// and noting as h does.
func (h *Handler) EphemeralRunners() EphemeralRunnerHandler {
	e := EphemeralRunnerHandler{Reader: h.Reader, Now: h.Now, after: h.after}
	if h.Writer != nil {
		e.Notes = h.Notes
	}
	return e
}

// Handle allows an EphemeralRunner's deletion and notes it
// (ephemeralRunnerDeleted); any other review is allowed untouched.
func (e EphemeralRunnerHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if !isEphemeralRunnerDelete(req) {
		return admission.Allowed("runnerguard notes only EphemeralRunner deletes here")
	}
	return e.ephemeralRunnerDeleted(ctx, req)
}

// isEphemeralRunnerDelete reports whether req deletes an EphemeralRunner.
func isEphemeralRunnerDelete(req admission.Request) bool {
	return req.Operation == admissionv1.Delete && req.SubResource == "" &&
		req.Resource.Group == arcscaleset.Group && req.Resource.Resource == arcscaleset.Resource
}

// ephemeralRunnerDeleted allows the deletion and, unless it is a dry run or
// a repeat, notes its requester once the EphemeralRunner shows it is being
// deleted: a review the API server did not send names an EphemeralRunner
// that is not being deleted, and writes nothing.
func (h EphemeralRunnerHandler) ephemeralRunnerDeleted(ctx context.Context, req admission.Request) admission.Response {
	allowed := admission.Allowed("runnerguard notes who deleted the EphemeralRunner")
	er := &metav1.PartialObjectMetadata{}
	if len(req.OldObject.Raw) == 0 || json.Unmarshal(req.OldObject.Raw, er) != nil || er.UID == "" {
		return allowed
	}
	dryRun := req.DryRun != nil && *req.DryRun
	if dryRun || er.DeletionTimestamp != nil || h.Notes == nil {
		return allowed
	}
	n := &v1alpha1.RunnerDeletion{
		ObjectMeta: metav1.ObjectMeta{Namespace: er.Namespace, Name: string(er.UID)},
		Deletion: v1alpha1.DeletionNote{
			Kind: arcscaleset.Kind, Pod: er.Name, UID: string(er.UID),
			Requester: req.UserInfo.Username, Operation: string(Delete), Time: metav1.NewTime(h.Now()),
			Job: jobOf(req.OldObject.Raw),
		},
	}
	// The note follows the answer, as the pod guard's effects do: the
	// EphemeralRunner's deletion shows only once it is answered.
	h.after.later(ctx, func(ctx context.Context) {
		h.Notes.Write(ctx, n, func(ctx context.Context) bool { return h.ephemeralRunnerDeleting(ctx, er) })
	})
	logf.FromContext(ctx).V(1).Info("EphemeralRunner deletion reviewed", "ephemeralRunner", er.Namespace+"/"+er.Name, "requester", req.UserInfo.Username)
	return allowed
}

// ephemeralRunnerDeleting waits until the EphemeralRunner reviewed shows a
// deletion under way with its UID: the API server marks it just after the
// guard answered. An EphemeralRunner without finalizers is gone at once,
// and then there is no pod of it for ARC to delete later.
func (h EphemeralRunnerHandler) ephemeralRunnerDeleting(ctx context.Context, er *metav1.PartialObjectMetadata) bool {
	ctx, cancel := context.WithTimeout(ctx, deletion.OwnerNoteWait)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, deletion.RetryEvery, true, func(ctx context.Context) (bool, error) {
		live := &metav1.PartialObjectMetadata{}
		live.SetGroupVersionKind(arcscaleset.GVK)
		if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: er.Namespace, Name: er.Name}, live); err != nil {
			if apierrors.IsNotFound(err) {
				return false, err
			}
			return false, nil
		}
		return live.UID == er.UID && live.DeletionTimestamp != nil, nil
	})
	return err == nil
}

// jobOf is the job the deleted EphemeralRunner's status names, kept on
// the note: ARC deletes the EphemeralRunner of a runner that ended, then
// the pod, and the record written after names the job from the note.
func jobOf(raw []byte) *v1alpha1.Job {
	er := &unstructured.Unstructured{}
	if er.UnmarshalJSON(raw) != nil {
		return nil
	}
	return arcscaleset.Job(er)
}
