// Package inject is the mutating webhook: at CREATE it instruments runner
// pods with the preset's diagnostic env, a termination-message policy that
// keeps the last log lines, the configured pod annotations and the vitals
// native sidecar (the autoscalers' marks are the leader's: they follow the
// runner's busy state). Mutate is the pure, idempotent mutation;
// Handler is the admission transport around it. It never rejects a pod:
// whatever it cannot do becomes an admission warning.
package inject
