// Package fields stands in for gitlab.com/gitlab-org/labkit/v2/fields, which
// the Go module proxy refuses: the log field names GitLab Runner uses. The
// maps of legacy names are empty here, so the runner's own log lines keep
// their names unmapped; no job's output passes through them.
package fields

// The field names GitLab Runner logs under.
const (
	DurationS      = "duration_s"
	HTTPStatusCode = "status"
)

// Deprecation describes a legacy field name.
type Deprecation struct{ Standard string }

// Deprecated maps legacy field names to their standard ones (none here).
var Deprecated = map[string]Deprecation{}

// VariantVersion maps a standard field to the version that introduced it.
var VariantVersion = map[string]int{}

// ServiceMapping maps service-specific field names (none here).
var ServiceMapping = map[string]string{}
