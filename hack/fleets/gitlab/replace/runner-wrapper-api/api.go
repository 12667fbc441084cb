// Package api stands in for GitLab Runner's runner_wrapper/api module, which
// the Go module proxy does not serve (its go.mod points at a local folder).
// Only `gitlab-runner wrapper` uses it, which this build does not register.
package api

import (
	"context"
	"errors"

	"github.com/sirupsen/logrus"
)

// Status is the wrapped process's state.
type Status int

// The wrapped process's states.
const (
	StatusUnknown Status = iota
	StatusRunning
	StatusInShutdown
	StatusStopped
)

// ErrProcessNotInitialized: no process is wrapped yet.
var ErrProcessNotInitialized = errors.New("process not initialized")

// ShutdownCallbackDef names where to report a shutdown.
type ShutdownCallbackDef interface {
	URL() string
	Method() string
}

// InitGracefulShutdownRequest asks for a graceful shutdown.
type InitGracefulShutdownRequest interface {
	ShutdownCallbackDef() ShutdownCallbackDef
}

// ShutdownCallback reports a shutdown.
type ShutdownCallback interface{ Run(ctx context.Context) }

type noCallback struct{}

func (noCallback) Run(context.Context) {}

// NewShutdownCallback is never reached: the wrapper command is not built.
func NewShutdownCallback(logrus.FieldLogger, ShutdownCallbackDef) ShutdownCallback {
	return noCallback{}
}

func (s Status) String() string {
	return [...]string{"unknown", "running", "in_shutdown", "stopped"}[s]
}
