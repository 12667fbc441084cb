package inject

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/internal/podtest"
)

// event is what recorder was given.
type event struct {
	kind, apiVersion, namespace, name string
	uid, eventType, reason, note      string
}

// recorder keeps the Events it is given (events.EventRecorder).
type recorder struct{ events []event }

func (r *recorder) Eventf(regarding, _ runtime.Object, eventType, reason, _, note string, args ...any) {
	m, err := meta.Accessor(regarding)
	if err != nil {
		panic(err)
	}
	gvk := regarding.GetObjectKind().GroupVersionKind()
	kind, apiVersion := gvk.Kind, gvk.GroupVersion().String()
	if _, ok := regarding.(*corev1.Pod); ok && kind == "" {
		kind, apiVersion = "Pod", "v1" // the recorder's scheme names it
	}
	r.events = append(r.events, event{kind, apiVersion, m.GetNamespace(), m.GetName(), string(m.GetUID()), eventType, reason, fmt.Sprintf(note, args...)})
}

// Each warning is also a Warning Event where a person looks: on the pod's
// controller, which exists, or else on the pod by the name it will have;
// never for a dry run, nor for a pod that got everything.
func TestWarningsAreEventsOnTheOwnerOrThePod(t *testing.T) {
	owned := podtest.Runner("restricted", "pool-x").Obj()
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "pool", UID: "rs-uid", Controller: ptr.To(true)}}
	bare := podtest.Runner("restricted", "").Obj()
	bare.GenerateName = "runner-abc-project-1-concurrent-0-"
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		ns     string
		dryRun bool
		want   []event
	}{
		{name: "an owned pod's warning is on its controller", pod: owned, ns: "restricted",
			want: []event{{kind: "ReplicaSet", apiVersion: "apps/v1", namespace: "restricted", name: "pool", uid: "rs-uid"}}},
		{name: "a bare pod's warning is on the pod by its generateName", pod: bare, ns: "restricted",
			want: []event{{kind: "Pod", apiVersion: "v1", namespace: "restricted", name: bare.GenerateName}}},
		{name: "a dry run gets the warning and no Event", pod: owned, ns: "restricted", dryRun: true},
		{name: "a pod that got everything gets no Event", pod: owned, ns: "ci"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := handler(t)
			rec := &recorder{}
			h.Recorder = rec
			raw, err := json.Marshal(tc.pod)
			require.NoError(t, err)
			req := create(tc.ns, raw)
			req.DryRun = ptr.To(tc.dryRun)
			resp := h.Handle(context.Background(), req)
			require.True(t, resp.Allowed)
			require.Len(t, rec.events, len(tc.want))
			if len(tc.want) == 0 {
				return
			}
			require.Len(t, resp.Warnings, 1)
			got := rec.events[0]
			assert.Equal(t, corev1.EventTypeWarning, got.eventType)
			assert.Equal(t, ReasonIncomplete, got.reason)
			assert.Equal(t, "pod "+tc.pod.Name+tc.pod.GenerateName+": "+resp.Warnings[0], got.note)
			assert.Contains(t, got.note, "to get the vitals, run the runners in a namespace labelled pod-security.kubernetes.io/enforce=privileged", "it says what to change")
			got.eventType, got.reason, got.note = "", "", ""
			assert.Equal(t, tc.want[0], got)
		})
	}
}

func TestALongWarningIsCutToWhatAnEventHolds(t *testing.T) {
	rec := &recorder{}
	h := &Handler{Recorder: rec}
	long := make([]byte, 2*maxNote)
	for i := range long {
		long[i] = 'x'
	}
	h.warningEvents("ci", podtest.Runner("ci", "r").Obj(), []string{string(long)})
	require.Len(t, rec.events, 1)
	assert.Len(t, rec.events[0].note, maxNote)
}
