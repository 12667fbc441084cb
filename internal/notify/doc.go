// Package notify tells a runner's death where the developer looks: a
// GitHub check run, a GitLab commit status, CloudEvents sinks. Plan and the
// renderings are pure; the Reporter, on the leader, sends each report once
// and keeps its account on the record's status.
package notify
