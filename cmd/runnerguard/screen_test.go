package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/runnerguard/runnerguard/internal/drain"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/presets"
)

func waitingFor(names ...string) []drain.Step {
	var out []drain.Step
	for _, n := range names {
		pod := podtest.Runner("ci", n).Running("runner").Obj()
		r, _ := presets.Match(pod, presets.Defaults())
		out = append(out, drain.Judge(drain.Runner{Pod: pod, Runner: r}, podtest.Start.Add(time.Minute)))
	}
	return out
}

func TestPipedProgressIsWrittenWhenWhatIsWaitedForChangesAndOnceAMinute(t *testing.T) {
	var b bytes.Buffer
	s := newScreen(&b)
	assert.False(t, s.tty, "a buffer is no terminal")
	now := podtest.Start.Add(time.Minute)
	s.Show(waitingFor("a", "b"), now, time.Time{})
	s.Show(waitingFor("a", "b"), now.Add(2*time.Second), time.Time{})
	s.Logf("evicting pod ci/x")
	s.Show(waitingFor("a"), now.Add(4*time.Second), time.Time{})
	s.Show(waitingFor("a"), now.Add(time.Minute+4*time.Second), time.Time{})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	assert.Equal(t, []string{
		"waiting for ci/a: generic, job -, running for 60s, protection ends 2026-11-08T12:00:00Z (in 6d23h)",
		"waiting for ci/b: generic, job -, running for 60s, protection ends 2026-11-08T12:00:00Z (in 6d23h)",
		"evicting pod ci/x",
		"waiting for ci/a: generic, job -, running for 64s, protection ends 2026-11-08T12:00:00Z (in 6d23h)",
		"waiting for ci/a: generic, job -, running for 2m4s, protection ends 2026-11-08T12:00:00Z (in 6d23h)",
	}, lines, "no escape codes when piped, and no repeat within a minute")
}

func TestATerminalsProgressIsRedrawnInPlaceUnderTheLog(t *testing.T) {
	var b bytes.Buffer
	s := &screen{w: &b, tty: true}
	now := podtest.Start.Add(time.Minute)
	s.Show(waitingFor("a"), now, time.Time{})
	s.Logf("evicting pod ci/x")
	s.Show(nil, now, time.Time{})
	view := strings.Join(drain.Progress(waitingFor("a"), now, time.Time{}), "\n") + "\n"
	assert.Equal(t, view+"\x1b[3A\x1b[J"+"evicting pod ci/x\n"+view+"\x1b[3A\x1b[J", b.String())
}
