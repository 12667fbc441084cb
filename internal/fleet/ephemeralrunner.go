package fleet

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// EphemeralRunnerGVK is ARC's EphemeralRunner, the record of one scale-set
// runner and its job.
var EphemeralRunnerGVK = schema.GroupVersionKind{Group: runnerpod.ARCScaleSetGroup, Version: "v1alpha1", Kind: runnerpod.EphemeralRunnerKind}

// EphemeralRunner is what an ARC scale-set pod's EphemeralRunner says of
// the pod's runner: its job signal (runnerpod.EphemeralRunnerJob), whether
// it is being deleted, and the job its status names (nil when it names
// none, or is not the pod's owner).
type EphemeralRunner struct {
	Signal   runnerpod.JobSignal
	Deleting bool
	Job      *v1alpha1.Job
}

// ErrNotOwner: the EphemeralRunner of the pod's owner's name has another
// UID (an idle runner of the same name recreated, or a reference
// re-pointed at one): it says nothing of the pod's job.
var ErrNotOwner = errors.New("the EphemeralRunner of that name is not the pod's owner")

// ReadEphemeralRunner reads the EphemeralRunner that owns the ARC scale-set
// pod, through r (uncached, by name: a stale one would misjudge), and
// judges it. A pod no EphemeralRunner owns says JobNotRead; one that
// cannot be read, or is not the pod's owner by UID, says JobUnreadable
// (taken to be busy) with the error, which the caller logs in its words.
func ReadEphemeralRunner(ctx context.Context, r client.Reader, pod *corev1.Pod) (EphemeralRunner, error) {
	ref := runnerpod.EphemeralRunnerRef(pod)
	if ref.Name == "" {
		return EphemeralRunner{Signal: runnerpod.JobNotRead}, nil
	}
	er := &unstructured.Unstructured{}
	er.SetGroupVersionKind(EphemeralRunnerGVK)
	if err := r.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: ref.Name}, er); err != nil {
		return EphemeralRunner{Signal: runnerpod.JobUnreadable}, err
	}
	if er.GetUID() != ref.UID {
		return EphemeralRunner{Signal: runnerpod.JobUnreadable}, fmt.Errorf("%w: owner UID %s, found UID %s", ErrNotOwner, ref.UID, er.GetUID())
	}
	signal, deleting := runnerpod.EphemeralRunnerJob(er, ref.UID)
	return EphemeralRunner{Signal: signal, Deleting: deleting, Job: JobFromEphemeralRunner(er)}, nil
}
