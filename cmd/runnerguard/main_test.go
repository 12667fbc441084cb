package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The conventions of the tools its users live in (kubectl, git): help on
// stdout and exit 0, usage errors exit 2, failures exit 1.
func TestRunExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		code    int
		stdout  string
		stderr  string
		noStdio bool
	}{
		{args: []string{"--help"}, code: 0, stdout: "Commands:"},
		{args: []string{"-h"}, code: 0, stdout: "why"},
		{args: []string{"help"}, code: 0, stdout: "deaths"},
		{args: nil, code: 2, stderr: "usage:"},
		{args: []string{"frobnicate"}, code: 2, stderr: `unknown command "frobnicate"`},
		{args: []string{"why", "--help"}, code: 0, stdout: "usage: runnerguard why POD"},
		{args: []string{"why", "-h"}, code: 0, stdout: "-namespace"},
		{args: []string{"deaths", "--help"}, code: 0, stdout: "-all-namespaces"},
		{args: []string{"serve", "--help"}, code: 0},
		{args: []string{"completion", "--help"}, code: 0, stdout: "completion bash|zsh"},
		{args: []string{"completion"}, code: 2, stderr: "completion bash|zsh"},
		{args: []string{"why"}, code: 2, stderr: "why POD"},
		{args: []string{"why", "a", "b"}, code: 2, stderr: "why POD"},
		{args: []string{"why", "--bogus", "p"}, code: 2, stderr: "flag provided but not defined"},
		{args: []string{"why", "p", "-o", "xml"}, code: 2, stderr: "want text, json or yaml"},
		{args: []string{"deaths", "-o", "yaml"}, code: 2, stderr: "want text, wide or json"},
		{args: []string{"version"}, code: 0, stdout: "runnerguard "},
		{args: []string{"completion", "bash"}, code: 0, stdout: "complete -F _runnerguard runnerguard kubectl-runnerguard"},
		{args: []string{"completion", "fish"}, code: 2, stderr: "not \"fish\""},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		assert.Equal(t, tc.code, code, "%v: stderr %s", tc.args, stderr.String())
		assert.Contains(t, stdout.String(), tc.stdout, "%v stdout", tc.args)
		assert.Contains(t, stderr.String(), tc.stderr, "%v stderr", tc.args)
	}
}
