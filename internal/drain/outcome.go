package drain

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// The exit codes of `runnerguard drain`, which a pipeline may rely on
// (docs/operations/cli.md). 1 and 2 are the CLI's own: the command failed
// (the API server could not be reached, an eviction failed), or a usage
// error.
const (
	// ExitDrained: every pod the drain was to remove is gone; the jobs
	// the deadline ended, if any, are said in the output.
	ExitDrained = 0
	// ExitTimeout: --timeout passed with pods still on the nodes (busy
	// runners whose jobs still run, or others still going); the nodes
	// stay cordoned.
	ExitTimeout = 5
	// ExitRefused: nothing was changed: a permission the drain needs is
	// missing, or kubectl's rules refuse one of the node's other pods
	// (DaemonSets, emptyDir data, unmanaged pods without their flags).
	ExitRefused = 6
)

// Outcome is how a drain ended.
type Outcome struct {
	// Refused: the drain changed nothing and said why.
	Refused bool
	// TimedOut: --timeout came before the nodes were empty.
	TimedOut bool
	// Ended counts the jobs the deadline ended.
	Ended int
}

// Code is the outcome's exit code.
func (o Outcome) Code() int {
	switch {
	case o.Refused:
		return ExitRefused
	case o.TimedOut:
		return ExitTimeout
	}
	return ExitDrained
}

// ParseDeadline reads --deadline: a duration from now ("2h", "90m") or a
// time (RFC3339, "2026-11-28T06:00:00Z").
func ParseDeadline(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("--deadline %q: a duration must be positive", s)
		}
		return now.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--deadline %q: neither a duration (2h, 90m) nor an RFC3339 time (2026-11-28T06:00:00Z)", s)
	}
	return t, nil
}

// errNoReason: a deadline ends jobs, and every ended job's record must say
// why.
var errNoReason = errors.New("--deadline ends the jobs still running then, and each one's record says why: give --reason")

// Reason is the override's value the drain sets at the deadline: the
// operator's reason, who ran the drain and of which nodes, which the
// guard's Event and the pod's annotation carry.
func Reason(reason, user string, nodes []string) (string, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return "", errNoReason
	}
	return fmt.Sprintf("%s (runnerguard drain of node %s by %s)", reason, strings.Join(nodes, ", "), user), nil
}
