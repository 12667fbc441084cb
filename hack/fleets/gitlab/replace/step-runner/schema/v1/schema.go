// Package schema stands in for step-runner's step schema (see the module's
// doc.go). A job whose `run:` holds steps is refused when it is decoded.
package schema

import "errors"

// StepInputs are a step's inputs.
type StepInputs map[string]any

// Step is one step.
type Step struct {
	Name   *string    `json:"name,omitempty" yaml:"name,omitempty"`
	Step   string     `json:"step,omitempty" yaml:"step,omitempty"`
	Inputs StepInputs `json:"inputs,omitempty" yaml:"inputs,omitempty"`
	Run    []Step     `json:"run,omitempty" yaml:"run,omitempty"`
}

// UnmarshalJSON refuses: GitLab Steps are not in this build.
func (*Step) UnmarshalJSON([]byte) error {
	return errors.New("GitLab Steps (run:) are not in this build of gitlab-runner")
}
