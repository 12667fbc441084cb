package printable

import (
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestText(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain text is kept as it is", "step 3 failed: exit 137\n\tat line 2", "step 3 failed: exit 137\n\tat line 2"},
		{"a build log's colours are escaped", "\x1b[31merror\x1b[0m", `\x1b[31merror\x1b[0m`},
		{"a sequence that sets the terminal's title is escaped", "\x1b]0;pwned\x07", `\x1b]0;pwned\a`},
		{"a carriage return that would overwrite the line is escaped", "ok\rFAILED", `ok\rFAILED`},
		{"C1 controls are escaped", "a\u009bb", `a\u009bb`},
		{"a right-to-left override is escaped", "file\u202egnp.exe", `file\u202egnp.exe`},
		{"an invalid byte is escaped, a real replacement character kept", "a\xffb\uFFFDc", `a\xffb` + "\uFFFD" + `c`},
		{"other scripts are kept", "ジョブ終了 ✓", "ジョブ終了 ✓"},
	} {
		assert.Equal(t, tc.want, Text(tc.in), tc.name)
	}
}

// Whatever a job writes, what comes out holds no control character but
// newline and tab, no bidirectional control and no invalid byte, keeps
// what was printable, and is its own Text.
func FuzzText(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b[2J\x1b[H", "\u202e", "a\xff", "\r\n\t\x00", "\uFFFD"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := Text(in)
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 out of %q", in)
		}
		for _, r := range out {
			if r != '\n' && r != '\t' && (unicode.IsControl(r) || bidi(r) || !unicode.IsPrint(r)) {
				t.Fatalf("%U left in %q (from %q)", r, out, in)
			}
		}
		if Text(out) != out {
			t.Fatalf("Text is not its own Text: %q", out)
		}
		if safe(in) && out != in {
			t.Fatalf("printable %q changed to %q", in, out)
		}
		if !strings.ContainsAny(in, "\x1b\r") && strings.Count(out, "\n") != strings.Count(in, "\n") {
			t.Fatalf("lines changed: %q to %q", in, out)
		}
	})
}

type noted struct{ notes []string }

func (n *noted) Eventf(_, _ runtime.Object, _, _, _, note string, args ...any) {
	n.notes = append(n.notes, fmt.Sprintf(note, args...))
}

// An Event's note names what others wrote; through Recorder it reaches
// `kubectl describe` as characters to read, never as sequences a terminal
// acts on.
func TestRecorderEscapesEveryNote(t *testing.T) {
	n := &noted{}
	Recorder(n).Eventf(nil, nil, "Warning", "DeleteRefused", "Delete", "refused %s's delete of %s", "evil\x1b]0;pwned\x07", "pod\u202e")
	assert.Equal(t, []string{`refused evil\x1b]0;pwned\a's delete of pod\u202e`}, n.notes)
}

// An escaped note longer than the API server takes is cut, at a
// character's start, rather than the Event lost.
func TestRecorderKeepsANoteWithinTheAPIServersBound(t *testing.T) {
	n := &noted{}
	long := strings.Repeat("é", 600) + "\x1b" // 1200 bytes, then a control byte escaped longer
	Recorder(n).Eventf(nil, nil, "Warning", "DeleteRefused", "Delete", "%s", long)
	require.Len(t, n.notes, 1)
	assert.LessOrEqual(t, len(n.notes[0]), 1024)
	assert.True(t, utf8.ValidString(n.notes[0]))
	assert.True(t, strings.HasSuffix(n.notes[0], "..."))
}
