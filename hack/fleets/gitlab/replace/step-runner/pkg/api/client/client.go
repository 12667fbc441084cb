// Package client stands in for step-runner's client types (see the module's
// doc.go).
package client

import "time"

// Variable is a job variable sent to step-runner.
type Variable struct {
	Key, Value   string
	File, Masked bool
}

// RunRequest asks step-runner to run steps.
type RunRequest struct {
	Id                string
	Timeout           *time.Duration
	WorkDir, BuildDir string
	Env               map[string]string
	Steps             string
	Variables         []Variable
}

// State is a run's state.
type State int

// The states GitLab Runner tells apart.
const (
	StateUnknown State = iota
	StateSuccess
	StateFailure
	StateCancelled
)

func (s State) String() string {
	return [...]string{"unknown", "success", "failure", "cancelled"}[s]
}

// ErrorKind is why a run failed.
type ErrorKind int

// The failure kinds GitLab Runner tells apart.
const (
	ErrorUnknown ErrorKind = iota
	ErrorInternal
	ErrorStepFailure
	ErrorCancelled
	ErrorTimeout
)

// Status is a finished run.
type Status struct {
	State     State
	ErrorKind ErrorKind
	Message   string
}
