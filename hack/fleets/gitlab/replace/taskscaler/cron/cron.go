// Package cron stands in for gitlab.com/gitlab-org/fleeting/taskscaler/cron,
// which the Go module proxy refuses. The Kubernetes executor parses it only
// for [[runners.autoscaler.policy]] periods (its pod autoscaler); the
// real-fleet suite configures no autoscaler, so Parse refuses.
package cron

import (
	"errors"
	"time"
)

// Schedule is a parsed period.
type Schedule interface{ Contains(time.Time) bool }

// Parse fails: autoscaler periods are not in this build.
func Parse(period, timezone string) (Schedule, error) {
	return nil, errors.New("autoscaler policy periods are not in this build of gitlab-runner")
}
