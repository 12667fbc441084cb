// Package guard is the validating webhook that refuses to delete or evict a
// pod whose runner is busy with a job. decide.go is the pure decision table
// of product.md; handler.go gathers its facts from the AdmissionReview and
// the API; response.go turns a decision into the answer.
package guard
