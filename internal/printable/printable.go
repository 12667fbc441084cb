// Package printable makes text that runners, jobs and requesters wrote
// safe to show a person: a job's last words, a pod's message or a name can
// carry terminal control sequences (a build log's ANSI colours, or worse: a
// sequence that rewrites the operator's screen or title), and Unicode's
// bidirectional controls can make text read other than it is. Text escapes
// them, so what reaches a terminal, an Event or a CI service is only
// characters to read.
package printable

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// Text is s with every control character but newline and tab, every
// bidirectional control and every invalid byte escaped as Go escapes them
// (\x1b, \u202e). Its output holds only what it keeps and printable
// characters, so Text of Text is Text: a caller may apply it to what is
// already safe.
func Text(s string) string {
	if safe(s) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == unicode.ReplacementChar && !strings.HasPrefix(s[i:], string(unicode.ReplacementChar)):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keep(r):
			b.WriteRune(r)
		default:
			q := fmt.Sprintf("%+q", string(r))
			b.WriteString(q[1 : len(q)-1])
		}
	}
	return b.String()
}

func safe(s string) bool {
	for i, r := range s {
		if !keep(r) || r == unicode.ReplacementChar && !strings.HasPrefix(s[i:], string(unicode.ReplacementChar)) {
			return false
		}
	}
	return true
}

// keep: newline, tab and the printable, less the bidirectional controls
// (which unicode.IsPrint counts as format characters, so not printable,
// but name here to be plain about them).
func keep(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return true
	case bidi(r):
		return false
	default:
		return unicode.IsPrint(r)
	}
}

func bidi(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c
}

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
