package printable

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// Recorder is r with every Event's note made safe to show (Text): a note
// quotes names and text that requesters, pods and jobs wrote (a forged
// requester's name, a job's id), and `kubectl describe` prints it as it
// is, escape sequences included. Every Event runnerguard writes goes
// through it, so no caller has to remember.
func Recorder(r events.EventRecorder) events.EventRecorder { return recorder{r} }

type recorder struct{ events.EventRecorder }

func (r recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, "%s", Text(fmt.Sprintf(note, args...)))
}
