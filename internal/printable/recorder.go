package printable

import (
	"fmt"
	"unicode/utf8"

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
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, "%s", noteOf(Text(fmt.Sprintf(note, args...))))
}

// maxNote is the API server's bound on an Event's note (events.k8s.io/v1
// validation): a longer note is refused, and the Event lost.
const maxNote = 1024

// noteOf is s within maxNote bytes, cut at a character's start and marked
// as cut: escaping (Text) can lengthen a note its writer had bounded.
func noteOf(s string) string {
	if len(s) <= maxNote {
		return s
	}
	const more = "..."
	n := maxNote - len(more)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + more
}
