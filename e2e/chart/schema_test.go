package chart_test

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A mistake in the values must fail the install with a message that names
// the value, not render a chart that quietly ignores it.
func TestSchemaRejectsBadValues(t *testing.T) {
	cases := []struct {
		name, values string
		// message is what both Helm versions print, after the path.
		path, message string
	}{
		{
			name:   "a misspelt key is refused",
			values: "guard: {deletFailurePolicy: Ignore}",
			path:   "/guard", message: "additional properties 'deletFailurePolicy' not allowed",
		},
		{
			name:   "a misspelt top-level key is refused",
			values: "replicas: 3",
			path:   "", message: "additional properties 'replicas' not allowed",
		},
		{
			name:   "a string where a number belongs is refused",
			values: "webhook: {timeoutSeconds: five}",
			path:   "/webhook/timeoutSeconds", message: "got string, want integer",
		},
		{
			name:   "a timeout the API server would refuse is refused",
			values: "webhook: {timeoutSeconds: 60}",
			path:   "/webhook/timeoutSeconds", message: "maximum: got 60, want 30",
		},
		{
			name:   "a failure policy other than Fail or Ignore is refused",
			values: "guard: {evictionFailurePolicy: Retry}",
			path:   "/guard/evictionFailurePolicy", message: "value must be one of 'Fail', 'Ignore'",
		},
		{
			name:   "a rollout other than warn or enforce is refused",
			values: "guard: {rollout: audit}",
			path:   "/guard/rollout", message: "value must be one of 'warn', 'enforce'",
		},
		{
			name:   "a fleet presets.enabled does not know is refused",
			values: "presets: {enabled: [drone]}",
			path:   "/presets/enabled/0", message: "value must be one of",
		},
		{
			name:   "an unknown preset is refused",
			values: "presets: {drone: {enabled: true, runnerContainers: [agent]}}",
			path:   "/presets", message: "additional properties 'drone' not allowed",
		},
		{
			name:   "a runner container name that is not a DNS label is refused",
			values: "presets: {generic: {runnerContainers: [Runner_1]}}",
			path:   "/presets/generic/runnerContainers/0", message: "'Runner_1' does not match pattern",
		},
		{
			name:   "a sampling interval without a unit is refused",
			values: "inject: {vitals: {interval: \"5\"}}",
			path:   "/inject/vitals/interval", message: "'5' does not match pattern",
		},
		{
			name:   "a malformed resource quantity is refused",
			values: "resources: {limits: {memory: 256MB}}",
			path:   "/resources/limits/memory", message: "'256MB' does not match pattern",
		},
		{
			name:   "an unknown log level is refused",
			values: "logLevel: verbose",
			path:   "/logLevel", message: "'verbose' does not match pattern",
		},
		{
			name:   "a Pod Security default that is not a level is refused",
			values: "inject: {podSecurityDefault: Restricted}",
			path:   "/inject/podSecurityDefault", message: "value must be one of '', 'privileged', 'baseline', 'restricted'",
		},
		{
			name:   "an unknown pull policy is refused",
			values: "image: {pullPolicy: Sometimes}",
			path:   "/image/pullPolicy", message: "value must be one of 'Always', 'IfNotPresent', 'Never'",
		},
		{
			name:   "an empty controller principal is refused",
			values: `presets: {arc-legacy: {controllerPrincipals: [""]}}`,
			path:   "/presets/arc-legacy/controllerPrincipals/0", message: "minLength: got 0, want 1",
		},
		{
			name:   "a misspelt policy key is refused",
			values: "policy: {garbageCollector: [x]}",
			path:   "/policy", message: "additional properties 'garbageCollector' not allowed",
		},
	}
	for _, h := range helms(t) {
		for _, tc := range cases {
			t.Run(h.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				_, err := h.template(t, tc.values)
				require.Error(t, err)
				assert.Contains(t, err.Error(), "values don't meet the specifications of the schema")
				// A oneOf failure lists its branches indented under it.
				assert.Regexp(t, `(?m)^\s*- at '`+regexp.QuoteMeta(tc.path+"': "+tc.message), err.Error())
			})
		}
	}
}
