// Package gracefulexitcmd stands in for step-runner's command helper (see
// the module's doc.go): a command that is killed once ctx ends, after delay.
package gracefulexitcmd

import (
	"context"
	"os/exec"
	"time"
)

// Cmd is an exec.Cmd.
type Cmd = exec.Cmd

// New is exec.CommandContext, waiting delay for the pipes after ctx ends.
func New(ctx context.Context, delay time.Duration, name string, args ...string) *Cmd {
	c := exec.CommandContext(ctx, name, args...)
	c.WaitDelay = delay
	return c
}
