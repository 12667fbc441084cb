package notify

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
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
		return death.Class(o.GetLabels()[death.ClassLabel]).Told() && o.GetCreationTimestamp().Add(r.Config.MaxAge.Duration).After(r.Now())
	})
	return ctrl.NewControllerManagedBy(mgr).Named("reporter").WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		// Its own status writes bring no new step (each returns when the
		// next is due): only a new record, its record or labels changed.
		WatchesMetadata(&v1alpha1.RunnerDeath{}, &handler.EnqueueRequestForObject{},
			builder.WithPredicates(told, predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		Complete(r)
}

// Reconcile takes each of the record's reports one step, one destination
// after another. Each attempt is claimed before it is made, and its
// outcome is written before the next is sent, in the same write as the
// next one's claim (the skips go with the first): a told death costs one
// write of its record per destination and one more, and a leader stopped
// mid-attempt leaves only that attempt in doubt.
func (r *Reporter) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	o := &v1alpha1.RunnerDeath{}
	if err := r.Reader.Get(ctx, req.NamespacedName, o); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	rec := death.FromObject(o)
	var (
		after   time.Duration
		pending []v1alpha1.Report // written with the next claim
		owed    []due
	)
	for _, t := range Plan(rec, r.Config) {
		prev := Find(o.Status, t.Destination)
		step, wait := Next(prev, t, r.Now())
		switch step {
		case StepSkip:
			pending = append(pending, v1alpha1.Report{Destination: t.Destination, Phase: PhaseSkipped, Message: cut(t.Skip, maxMessage)})
		case StepWait:
			after = soonest(after, wait)
		case StepAttempt:
			// A copy: the claim's write changes the status prev points into.
			if prev != nil {
				prev = ptr.To(*prev)
			}
			owed = append(owed, due{target: t, prev: prev})
		}
	}
	skipped := pending
	outcome := false // pending holds an attempt's outcome
	for _, d := range owed {
		d.claimed = Claim(d.prev, d.target.Destination, r.Now())
		if err := r.write(ctx, o, append(pending, d.claimed)...); err != nil {
			if outcome {
				// Another writer came between, or the write failed: the
				// attempt made is told, the next waits for the record's next
				// look, a second on.
				return ctrl.Result{RequeueAfter: time.Second}, r.writeAfter(ctx, o, pending...)
			}
			return ctrl.Result{}, err
		}
		countSkips(skipped)
		skipped = nil
		out := r.attempt(ctx, o.UID, o.Name, rec, d)
		if out.Phase == PhaseRetrying {
			after = soonest(after, out.NextAttemptAt.Sub(r.Now()))
		}
		pending, outcome = []v1alpha1.Report{out}, true
	}
	switch {
	case outcome:
		return ctrl.Result{RequeueAfter: after}, r.writeAfter(ctx, o, pending...)
	case len(pending) > 0:
		if err := r.write(ctx, o, pending...); err != nil {
			return ctrl.Result{}, err
		}
		countSkips(skipped)
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

// countSkips counts the skipped reports written.
func countSkips(reps []v1alpha1.Report) {
	for _, rep := range reps {
		reportsTotal.WithLabelValues(kind(rep.Destination), PhaseSkipped).Inc()
	}
}

// due is an attempt claimed: its target, its report before the claim
// (nil for the first) and the claim.
type due struct {
	target  Target
	prev    *v1alpha1.Report
	claimed v1alpha1.Report
}

// attempt makes one claimed attempt of the record (its UID and name) and
// returns its outcome.
func (r *Reporter) attempt(ctx context.Context, uid types.UID, name string, rec death.Record, a due) v1alpha1.Report {
	t, prev := a.target, a.prev
	log := logf.FromContext(ctx).WithValues("destination", t.Destination)
	inDoubt := prev != nil && prev.Phase == PhaseSending
	d := Delivery{Record: rec, ID: string(uid), Name: name, Target: t}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	where, found, err := "", false, error(nil)
	s, ok := r.Senders[t.Destination]
	switch {
	case !ok:
		err = fmt.Errorf("no sender for %s", t.Destination)
	case prev != nil && prev.Attempts > 0:
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
	out := Outcome(a.claimed, where, err, r.Config.MaxAttempts, r.Now())
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
	return out
}

// write puts the reports on the record's status in one write, failing if
// the record changed since it was read (another writer's claim).
func (r *Reporter) write(ctx context.Context, o *v1alpha1.RunnerDeath, reps ...v1alpha1.Report) error {
	base := o.DeepCopy()
	for _, rep := range reps {
		Set(&o.Status, rep)
	}
	return r.Client.Status().Patch(ctx, o, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// writeAfter writes attempts' outcomes, reading the record again when it
// changed meanwhile or the write failed: the attempts were made and must
// be told.
func (r *Reporter) writeAfter(ctx context.Context, o *v1alpha1.RunnerDeath, reps ...v1alpha1.Report) error {
	for range 5 {
		err := r.write(ctx, o, reps...)
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	return fmt.Errorf("writing the outcome of %d reports on %s/%s: five writes failed", len(reps), o.Namespace, o.Name)
}

func soonest(a, b time.Duration) time.Duration {
	b = max(b, time.Second)
	if a == 0 || b < a {
		return b
	}
	return a
}
