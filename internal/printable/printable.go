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
