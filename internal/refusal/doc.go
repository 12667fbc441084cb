// Package refusal keeps what the guard refused to let be done to a runner
// where it outlives the API server's Event TTL: on the runner's pod, in the
// annotation runnerguard.io/refusals, which only runnerguard may write (the
// chart's admission policy), and from there on the runner's death record.
//
// The value's shape, its bounds and the merge of a new refusal into it are
// pure (list.go); Writer, its one writer, patches it on the pod after the
// guard has answered.
package refusal
