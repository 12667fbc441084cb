// Package addmask stands in for gitlab.com/ajwalker/phrasestream/addmask,
// which the Go module proxy refuses. Only gitlab-runner-helper proxy-exec
// uses it, and only when a runner sets proxy_exec (off by default); the
// real-fleet suite never sets it, so New refuses.
package addmask

import (
	"errors"
	"io"
)

// AddMask is never made: New always fails.
type AddMask struct{}

// New fails: proxy_exec's masking is not in this build.
func New(_ any, _, _ io.Writer) (*AddMask, error) {
	return nil, errors.New("proxy_exec masking is not in this build of gitlab-runner")
}

// Get is never reached (no AddMask exists).
func (*AddMask) Get(int) io.Writer { return io.Discard }

// Close is never reached (no AddMask exists).
func (*AddMask) Close() error { return nil }
