// Package report is what `runnerguard why` and `runnerguard deaths` print:
// it reads a pod's records and status (Lookup) or a window of records
// (Summarize) and renders them for a terminal. It never reads Events:
// anyone who may create an Event could have written one.
package report
