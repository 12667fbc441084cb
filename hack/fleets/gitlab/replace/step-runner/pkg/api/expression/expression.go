// Package expression stands in for step-runner's expression evaluator (see
// the module's doc.go): NewEvaluator refuses, so a job with inputs fails.
package expression

import (
	"gitlab.com/gitlab-org/moa"
	"gitlab.com/gitlab-org/moa/ast"
	"gitlab.com/gitlab-org/moa/value"
)

// Sensitive marks a value that must not be printed.
const Sensitive uint16 = 1

// Input is a named job input.
type Input struct {
	Key   string
	Value value.Value
}

// Evaluator is never made: NewEvaluator always fails.
type Evaluator struct{}

// NewEvaluator fails: job inputs are not in this build.
func NewEvaluator(value.Value) (*Evaluator, error) { return nil, moa.ErrNotInThisBuild }

// Eval is never reached.
func (*Evaluator) Eval(string, ast.Expr) (value.Value, error) {
	return value.Null(), moa.ErrNotInThisBuild
}
