// Package guard is the validating webhook that refuses to delete or evict a
// pod whose runner is busy with a job. decide.go is the pure decision table
// (docs/concepts has it in prose); handler.go gathers its facts from the
// AdmissionReview and the API; confirm.go checks that a review names a real
// pod before anything is written about it; response.go turns a decision
// into the answer; cache.go is its metadata cache of runner pods.
package guard
