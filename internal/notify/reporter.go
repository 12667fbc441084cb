package notify

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/death"
)

// Reporter tells each new death's destinations, on the leader, apart from
// the recorder: it watches the records' metadata, reads each record whole
// from the API server, and keeps each report's account on the record's
// status, its one writer. An attempt is claimed on the status (an
// optimistic write) before it is made, so two leaders never both make it,
// and one that stopped mid-attempt leaves it Sending: the next asks the
// destination whether it arrived before it sends again.
type Reporter struct {
	Reader  client.Reader
	Client  client.Client
	Config  config.Reports
	Senders map[string]Sender
	Now     func() time.Time
}

// workers is how many records are told at once: a service that answers
// slowly (or holds a request until the attempt's timeout) delays only the
// records it holds, not every other death's report. One record is never
// taken by two workers.
const workers = 4

// SetupWithManager registers the reporter's controller: its own queue,
// retried with backoff, leader-only.
func (r *Reporter) SetupWithManager(mgr ctrl.Manager) error {
	told := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return Told(death.Class(o.GetLabels()[death.ClassLabel])) && o.GetCreationTimestamp().Add(r.Config.MaxAge.Duration).After(r.Now())
	})
	return ctrl.NewControllerManagedBy(mgr).Named("reporter").WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		WatchesMetadata(&v1alpha1.RunnerDeath{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(told)).
		Complete(r)
}

// Reconcile takes each of the record's reports one step.
func (r *Reporter) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	o := &v1alpha1.RunnerDeath{}
	if err := r.Reader.Get(ctx, req.NamespacedName, o); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	rec := death.FromObject(o)
	var after time.Duration
	for _, t := range Plan(rec, r.Config) {
		step, wait := Next(Find(o.Status, t.Destination), t, r.Now())
		switch step {
		case StepSkip:
			if err := r.write(ctx, o, v1alpha1.Report{Destination: t.Destination, Phase: PhaseSkipped, Message: cut(t.Skip, maxMessage)}); err != nil {
				return ctrl.Result{}, err
			}
			reportsTotal.WithLabelValues(kind(t.Destination), PhaseSkipped).Inc()
		case StepWait:
			after = soonest(after, wait)
		case StepAttempt:
			rep, err := r.attempt(ctx, o, rec, t)
			if err != nil {
				return ctrl.Result{}, err
			}
			if rep.Phase == PhaseRetrying {
				after = soonest(after, rep.NextAttemptAt.Sub(r.Now()))
			}
		}
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

// attempt claims one attempt, makes it and writes its outcome.
func (r *Reporter) attempt(ctx context.Context, o *v1alpha1.RunnerDeath, rec death.Record, t Target) (v1alpha1.Report, error) {
	log := logf.FromContext(ctx).WithValues("destination", t.Destination)
	prev := Find(o.Status, t.Destination)
	inDoubt := prev != nil && prev.Phase == PhaseSending
	claimed := Claim(prev, t.Destination, r.Now())
	if err := r.write(ctx, o, claimed); err != nil {
		return claimed, err
	}
	s, ok := r.Senders[t.Destination]
	if !ok {
		return claimed, fmt.Errorf("no sender for %s", t.Destination)
	}
	d := Delivery{Record: rec, ID: string(o.UID), Name: o.Name, Target: t}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	where, found, err := "", false, error(nil)
	if prev != nil && prev.Attempts > 0 {
		// An earlier attempt may have arrived though its outcome was not
		// written (a stop mid-attempt) or was a failure the service had
		// already acted on (a 5xx after the write).
		where, found, err = s.Find(ctx, d)
	}
	switch {
	case err != nil || found:
	case inDoubt && int(prev.Attempts) >= r.Config.MaxAttempts:
		err = errors.New("the attempts ran out; the last one's outcome was never written, and the destination does not show it")
	default:
		where, err = s.Send(ctx, d)
	}
	out := Outcome(claimed, where, err, r.Config.MaxAttempts, r.Now())
	switch {
	case out.Phase == PhaseSkipped:
		log.Info("report skipped", "reason", err.Error())
	case err != nil:
		log.Info("report failed", "attempt", out.Attempts, "phase", out.Phase, "error", err.Error())
		failuresTotal.WithLabelValues(kind(t.Destination), statusClass(Status(err))).Inc()
	default:
		log.V(1).Info("reported", "where", where, "found", found)
	}
	reportsTotal.WithLabelValues(kind(t.Destination), out.Phase).Inc()
	return out, r.writeAfter(ctx, o, out)
}

// write puts the report on the record's status, failing if the record
// changed since it was read (another writer's claim).
func (r *Reporter) write(ctx context.Context, o *v1alpha1.RunnerDeath, rep v1alpha1.Report) error {
	base := o.DeepCopy()
	Set(&o.Status, rep)
	return r.Client.Status().Patch(ctx, o, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// writeAfter writes an attempt's outcome, reading the record again when
// it changed meanwhile: the attempt was made and must be told.
func (r *Reporter) writeAfter(ctx context.Context, o *v1alpha1.RunnerDeath, rep v1alpha1.Report) error {
	for range 5 {
		err := r.write(ctx, o, rep)
		if !apierrors.IsConflict(err) {
			return client.IgnoreNotFound(err)
		}
		if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	return fmt.Errorf("writing the outcome of %s's report on %s/%s: the record kept changing", rep.Destination, o.Namespace, o.Name)
}

func soonest(a, b time.Duration) time.Duration {
	b = max(b, time.Second)
	if a == 0 || b < a {
		return b
	}
	return a
}
