// Package fleets holds the real-fleet suite (build tag fleets): real CI
// fleets on the node cluster against runnerguard installed as the node
// suite installs it. GitLab Runner's Kubernetes executor (built by
// hack/fleets/gitlab.sh from the Go module proxy) takes jobs from a
// stand-in coordinator (package gitlabapi) in each manager layout the
// GitLab preset supports. Run it with make fleets; see
// docs/development/fleets.md.
package fleets
