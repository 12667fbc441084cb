package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/runnerguard/runnerguard/internal/drain"
)

// screen is where a drain reports: log lines (its own and kubectl's drain
// library's) and the view of what it still waits for. On a terminal the
// view is redrawn in place under the log; piped, it is written as plain
// lines when what is waited for changes, and once a minute.
type screen struct {
	mu  sync.Mutex
	w   io.Writer
	tty bool
	// shown is how many lines of the view are on the terminal now.
	shown int
	view  []string
	// plain output: the pods last listed, and when.
	listed  []string
	listeAt time.Time
}

func newScreen(w io.Writer) *screen {
	f, ok := w.(*os.File)
	return &screen{w: w, tty: ok && term.IsTerminal(int(f.Fd()))}
}

// Write is a log line (kubectl's drain library writes here): above the
// view on a terminal.
func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.erase()
	n, err := s.w.Write(p)
	s.draw()
	return n, err
}

// Logf writes one log line.
func (s *screen) Logf(format string, a ...any) {
	_, _ = s.Write([]byte(fmt.Sprintf(format, a...) + "\n"))
}

// Show shows what the drain waits for.
func (s *screen) Show(waiting []drain.Step, now, deadline time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tty {
		s.erase()
		s.view = nil
		if len(waiting) > 0 {
			s.view = drain.Progress(waiting, now, deadline)
		}
		s.draw()
		return
	}
	var pods []string
	for _, w := range waiting {
		pods = append(pods, w.Pod.Namespace+"/"+w.Pod.Name)
	}
	if slices.Equal(pods, s.listed) && now.Sub(s.listeAt) < time.Minute {
		return
	}
	s.listed, s.listeAt = pods, now
	for _, w := range waiting {
		fmt.Fprintln(s.w, drain.Line(w, now))
	}
}

func (s *screen) erase() {
	if s.tty && s.shown > 0 {
		fmt.Fprintf(s.w, "\x1b[%dA\x1b[J", s.shown)
	}
	s.shown = 0
}

func (s *screen) draw() {
	if !s.tty || len(s.view) == 0 {
		return
	}
	fmt.Fprintln(s.w, strings.Join(s.view, "\n"))
	s.shown = len(s.view)
}
