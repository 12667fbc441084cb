package recorder

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Views keeps each recorded death's fleet's own account of the job
// (fleet.OwnView) on the record's status, once the system has given it: a
// TaskRun's Succeeded condition is set by Tekton's controller a moment
// after the pod's end, and may come later than the record. It is the one
// writer of status.fleetView, on the leader; a record whose account is
// not final within viewPatience, or whose owner is gone, keeps none, and
// the waits of a leader that stops are not carried to the next.
type Views struct {
	// Reader reads the owners, uncached (they are read once or twice a
	// death); Writer patches the records' status.
	Reader client.Reader
	Writer client.Client
	Now    func() time.Time
	// every is how often the owners waited for are read again.
	every time.Duration
	queue chan viewWait
}

// viewWait is one record waiting for its owner's account.
type viewWait struct {
	record types.NamespacedName
	owner  metav1.OwnerReference
	view   fleet.OwnView
	// pod and createdBy are the pod's name and recorded creator, which
	// the owner must stand for (fleet.OwnView.OfPod).
	pod, createdBy string
	until          time.Time
}

const (
	// viewPatience bounds the wait for a system's account: a controller
	// judges its object within moments of the pod's end, or it is down.
	viewPatience = 2 * time.Minute
	// viewWaiting bounds the records waiting at once; one over it keeps
	// no account (a burst of deaths in a fleet whose controller is down).
	viewWaiting = 1024
)

// NewViews returns Views reading through r and writing through w.
func NewViews(r client.Reader, w client.Client) *Views {
	return &Views{Reader: r, Writer: w, Now: time.Now, every: 2 * time.Second, queue: make(chan viewWait, viewWaiting)}
}

// follow waits for the account of pod's death on record, when its fleet
// keeps one on the pod's controlling owner. It never blocks.
func (v *Views) follow(ctx context.Context, pod *corev1.Pod, preset string, record types.NamespacedName) {
	if v == nil {
		return
	}
	f, ok := presets.For(runnerpod.PresetName(preset))
	if !ok || f.Traits().OwnView == nil {
		return
	}
	view := *f.Traits().OwnView
	ref := metav1.GetControllerOf(pod)
	if !view.Owns(ref) {
		return
	}
	select {
	case v.queue <- viewWait{record: record, owner: *ref, view: view, pod: pod.Name, createdBy: pod.Annotations[runnerpod.CreatedBy], until: v.Now().Add(viewPatience)}:
	default:
		logf.FromContext(ctx).Info("the fleet's own account of a death not kept: too many waiting", "record", record)
	}
}

// Start reads the waited-for owners every v.every until ctx ends.
func (v *Views) Start(ctx context.Context) error {
	var waiting []viewWait
	tick := time.NewTicker(v.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case w := <-v.queue:
			waiting = append(waiting, w)
		case <-tick.C:
			waiting = v.look(ctx, waiting)
		}
	}
}

// NeedLeaderElection: the leader alone writes records.
func (v *Views) NeedLeaderElection() bool { return true }

// look reads each waiting owner once and keeps the accounts that are
// final; it returns those still waiting.
func (v *Views) look(ctx context.Context, waiting []viewWait) []viewWait {
	log := logf.FromContext(ctx)
	now := v.Now()
	kept := waiting[:0]
	for _, w := range waiting {
		view, done, err := v.read(ctx, w)
		switch {
		case err != nil:
			log.Info("the fleet's own account of a death not read", "record", w.record, "owner", w.owner.Kind+"/"+w.owner.Name, "error", err.Error())
		case view != nil:
			if err := v.keep(ctx, w.record, view); err != nil {
				log.Info("the fleet's own account of a death not kept", "record", w.record, "error", err.Error())
			}
			continue
		case done:
			continue
		}
		if now.Before(w.until) {
			kept = append(kept, w)
		}
	}
	return kept
}

// read is the owner's account, nil while not final; done: there will be
// none (the owner is gone, or is another object now).
func (v *Views) read(ctx context.Context, w viewWait) (view *v1alpha1.FleetView, done bool, err error) {
	o := &unstructured.Unstructured{}
	o.SetAPIVersion(w.owner.APIVersion)
	o.SetKind(w.owner.Kind)
	err = v.Reader.Get(ctx, client.ObjectKey{Namespace: w.record.Namespace, Name: w.owner.Name}, o)
	if apierrors.IsNotFound(err) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	if o.GetUID() != w.owner.UID {
		return nil, true, nil
	}
	return w.view.OfPod(o, w.pod, w.createdBy), false, nil
}

// keep writes view on the record's status, once.
func (v *Views) keep(ctx context.Context, record types.NamespacedName, view *v1alpha1.FleetView) error {
	body, err := json.Marshal(map[string]any{"status": map[string]any{"fleetView": view}})
	if err != nil {
		return err
	}
	r := &v1alpha1.RunnerDeath{ObjectMeta: metav1.ObjectMeta{Namespace: record.Namespace, Name: record.Name}}
	return client.IgnoreNotFound(v.Writer.Status().Patch(ctx, r, client.RawPatch(types.MergePatchType, body)))
}
