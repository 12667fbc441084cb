// Package guard is the validating webhook that refuses to delete or evict a
// pod whose runner is busy with a job, and to exec or attach into its
// runner container. One room per review, one file each:
// pod_webhook.go (Handler: pod deletes and evictions), connect_webhook.go
// (ConnectHandler: exec and attach) and record_webhook.go (RecordHandler:
// deletes of a fleet's records, ARC's EphemeralRunners, noted, never
// refused). Each room's Review returns its answer and what follows it
// (After); after.go is the one seam that sends the answer and runs what
// follows on one bounded pool.
// decide.go is the pure decision table (docs/concepts has it in prose),
// decide_connect.go its exec and attach form, jobowner.go the job-owner
// rule; facts.go reads what the decisions need (Readers); text.go holds
// every word a person reads (refusals, warnings, Events); response.go
// turns a decision into the answer; forged.go checks that a review the
// guard acts on was one the API server can have sent (a real pod, a
// guarded namespace) before anything is written about it; effects.go is
// what follows the pod review's answer, as data; cache.go is the metadata cache of
// runner pods.
package guard
