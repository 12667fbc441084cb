package fleet

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Label gives pod the runner label, so that the recorder's cache holds it,
// unless it has it. It is the one way runnerguard writes that label after a
// pod's creation (the injector sets it in the pod it admits): the labeler
// for pods the injector did not see (recorder.Labeler), and the guard for such a pod whose
// deletion it lets through, before the deletion can remove it unseen. The
// patch carries the pod's UID: a pod recreated under that name has another,
// which the API server refuses to change, so it never gets the label by
// mistake. A pod already gone, or replaced by another of its name (the API
// server refuses the UID as an invalid change), needs no label.
func Label(ctx context.Context, w client.Writer, pod *corev1.Pod) error {
	if _, ok := pod.Labels[runnerpod.RunnerLabel]; ok {
		return nil
	}
	base := runnerpod.Meta()
	base.Namespace, base.Name = pod.Namespace, pod.Name
	patched := base.DeepCopy()
	patched.UID = pod.UID
	patched.Labels = map[string]string{runnerpod.RunnerLabel: "true"}
	err := w.Patch(ctx, patched, client.MergeFrom(base))
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil
	}
	return err
}
