// Package moa stands in for gitlab.com/gitlab-org/moa, which the Go module
// proxy refuses: the expression language of GitLab's job inputs and steps.
// GitLab Runner parses it only for a job that carries `inputs` (or runs
// steps); the real-fleet suite's jobs carry none, and a job that did is
// refused when it is decoded (see value.Value.UnmarshalJSON).
package moa

import (
	"errors"

	"gitlab.com/gitlab-org/moa/ast"
)

// ErrNotInThisBuild refuses every use of the expression language.
var ErrNotInThisBuild = errors.New("job inputs and steps expressions are not in this build of gitlab-runner")

// ParseTemplate refuses.
func ParseTemplate(string) (ast.Expr, error) { return nil, ErrNotInThisBuild }

// EscapeTemplate returns text with the template opener escaped.
func EscapeTemplate(text string) string { return text }
