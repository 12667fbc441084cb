package death

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Recorder writes each death where operators look, once: a structured log
// line, an Event on the pod (readable after the pod is gone, carrying the
// whole record), and a counter. The webhook and the pod watcher share it.
type Recorder struct {
	Client client.Client
	// Reader reads the deletion notes uncached: a cached read would make
	// the process watch every Event in the cluster.
	Reader client.Reader
	// Controller and Instance fill the Event's reportingController and
	// reportingInstance.
	Controller, Instance string
	Now                  func() time.Time
	seen                 *SeenSet
}

// NewRecorder returns a Recorder remembering the last few thousand deaths,
// which spares the API server a create per resync.
func NewRecorder(c client.Client, r client.Reader, instance string) *Recorder {
	return &Recorder{Client: c, Reader: r, Controller: "runnerguard.io/runnerguard", Instance: instance, Now: time.Now, seen: NewSeenSet(4096)}
}

var deaths = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "runnerguard_runner_deaths_total",
	Help: "Runner deaths recorded, by namespace and class of death.",
}, []string{"namespace", "class"})

// RegisterMetrics registers the death counter on reg.
func RegisterMetrics(reg prometheus.Registerer) error { return reg.Register(deaths) }

// Record writes r's Event, log line and count, unless the death is already
// on record (by this process or any other). It reports whether it wrote.
func (rc *Recorder) Record(ctx context.Context, pod *corev1.Pod, r Record) (bool, error) {
	key := r.Key()
	if rc.seen.Has(key) {
		return false, nil
	}
	ev := rc.event(pod, EventName(pod.Name, "died", key), r.EventType(), ReasonDied, "Died", r.Note())
	ev.Annotations = map[string]string{RecordAnnotation: r.JSON()}
	err := rc.Client.Create(ctx, ev)
	if apierrors.IsAlreadyExists(err) {
		rc.seen.Add(key)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("writing the death Event of %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	rc.seen.Add(key)
	deaths.WithLabelValues(r.Namespace, string(r.Class)).Inc()
	// One key holding the whole record: its JSON is the record's schema,
	// and its fields cannot collide with the request's own log keys.
	logf.FromContext(ctx).WithName("death").Info("runner death record", "record", r)
	return true, nil
}

// MarkDeleted notes on the pod who deleted it while its runner ran, so the
// record written when the runner's end is reported, by whichever replica
// leads, names the deleter.
func (rc *Recorder) MarkDeleted(ctx context.Context, pod *corev1.Pod, requester, why string) error {
	ev := rc.event(pod, EventName(pod.Name, "deleted", string(pod.UID)), corev1.EventTypeNormal, ReasonDeleted, "Delete",
		fmt.Sprintf("running runner deleted by %s (%s)", requester, why))
	ev.Annotations = map[string]string{DeletedByAnnotation: requester}
	if err := rc.Client.Create(ctx, ev); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("noting the deletion of %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// DeletedBy reads the deleter MarkDeleted noted, or "" when none did (the
// delete was not reviewed: an exempt principal, or the guard was down).
func (rc *Recorder) DeletedBy(ctx context.Context, pod *corev1.Pod) (string, error) {
	ev := &eventsv1.Event{}
	err := rc.Reader.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: EventName(pod.Name, "deleted", string(pod.UID))}, ev)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return ev.Annotations[DeletedByAnnotation], nil
}

// Stuck writes the one RunnerStuck Event of a runner that has waited too
// long to start.
func (rc *Recorder) Stuck(ctx context.Context, pod *corev1.Pod, container, reason, message string, waited time.Duration) error {
	note := fmt.Sprintf("runner %q has not started after %s: %s", container, waited.Truncate(time.Second), reason)
	if message != "" {
		note += ": " + message
	}
	if len(note) > maxNote {
		note = note[:maxNote-3] + "..."
	}
	ev := rc.event(pod, EventName(pod.Name, "stuck", string(pod.UID)+"/"+container), corev1.EventTypeWarning, ReasonStuck, "Wait", note)
	if err := rc.Client.Create(ctx, ev); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("writing the RunnerStuck Event of %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

func (rc *Recorder) event(pod *corev1.Pod, name, typ, reason, action, note string) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: name},
		EventTime:  metav1.NewMicroTime(rc.Now()),
		Regarding: corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace,
			Name: pod.Name, UID: pod.UID, ResourceVersion: pod.ResourceVersion},
		ReportingController: rc.Controller, ReportingInstance: rc.Instance,
		Type: typ, Reason: reason, Action: action, Note: note,
	}
}
