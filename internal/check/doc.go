// Package check is `runnerguard check`: does the API server reach the guard
// and the injector, is cert-manager's certificate ready, which namespaces
// and presets are on. Gather reads the installation and asks each webhook a
// server-side dry run (it reads the API and changes nothing); everything
// else here is pure: the probes' shapes, what an answer means (Classify*),
// the judgement of the facts (Judge) and the report.
package check
