// Package registration builds runnerguard's webhook configurations from the
// config: the objects the chart templates and the tests register, so the
// rules, matchConditions and policies are written in one place and the
// chart's copy is checked against them.
package registration
