// Package record is the vitals sidecar's output schema, a public contract:
// the JSON line streamed on stdout and written to vitals.json (Line), and the
// compact final reading left in the sidecar's termination message (Final),
// which the death record joins.
package record
