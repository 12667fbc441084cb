// Package runner stands in for step-runner's builtin step context (see the
// module's doc.go).
package runner

import (
	"io"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
)

// BuiltinContext is what a builtin step sees.
type BuiltinContext interface {
	GetJobVars() map[string]*structpb.Value
	GetEnvs() map[string]string
	Pipe() (stdout, stderr io.Writer)
	WorkDir() string
	GracefulExitDelay() time.Duration
}
