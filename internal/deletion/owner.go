package deletion

import (
	"context"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
)

// OwnerNoteWait bounds the waits on the note of the deletion of a fleet's
// record of a runner (ARC's EphemeralRunner), which the guard writes after
// its answer, once the deletion
// shows: the guard's wait for it to show, and the readers' for the note,
// since ARC's finalizer can delete the runner's pod first.
const OwnerNoteWait = 5 * time.Second

// errNoOwner: the pod has no record for a note to be of.
var errNoOwner = errors.New("the pod has no fleet's record as its owner")

// OwnerNote is the guard's note of the deletion of the fleet's record that
// controls a pod of namespace ns (ref: presets.RecordRef), read through r;
// the record's UID names the note. It waits for the note up to within (0: one read). Without
// one, it returns nil and the last read's error (nil when a note of another
// kind held that name, which says nothing of it).
func OwnerNote(ctx context.Context, r client.Reader, ns string, ref metav1.OwnerReference, within time.Duration) (*v1alpha1.DeletionNote, error) {
	if ref.UID == "" {
		return nil, errNoOwner
	}
	key := client.ObjectKey{Namespace: ns, Name: string(ref.UID)}
	var note *v1alpha1.DeletionNote
	var last error
	read := func(ctx context.Context) (bool, error) {
		n := &v1alpha1.RunnerDeletion{}
		if last = r.Get(ctx, key, n); last != nil {
			return false, nil
		}
		if n.Deletion.Kind == ref.Kind && n.Deletion.UID == string(ref.UID) {
			note = &n.Deletion
		}
		return true, nil
	}
	if within <= 0 {
		_, _ = read(ctx)
		return note, last
	}
	_ = wait.PollUntilContextTimeout(ctx, RetryEvery, within, true, read)
	return note, last
}
