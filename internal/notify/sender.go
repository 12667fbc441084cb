package notify

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/runnerguard/runnerguard/internal/death"
)

// Sender tells one destination. Find asks the destination whether an
// earlier attempt's report arrived (its outcome unknown to the record);
// Send tells it. Each returns where the report is.
type Sender interface {
	Find(ctx context.Context, r Delivery) (where string, found bool, err error)
	Send(ctx context.Context, r Delivery) (where string, err error)
}

// Delivery is what a sender needs: the record, its object's identity (a
// stable id for the destination to know it by) and the plan's target.
type Delivery struct {
	Record death.Record
	// ID is the RunnerDeath's UID: the check run's external_id and the
	// CloudEvent's id.
	ID     string
	Name   string
	Target Target
}

// NotTold is a sender's finding that the record must not be told where
// its target says, from what the service answered (a repository of
// another id, a job another agent ran): no attempt would change it, so
// the report is Skipped with Reason.
type NotTold struct{ Reason string }

func (n *NotTold) Error() string { return n.Reason }

// Failure is a failed attempt as the service answered it: its HTTP status
// (0 when none came) and the wait it asked for (Retry-After, a rate
// limit's reset).
type Failure struct {
	Status int
	After  time.Duration
	Err    error
}

func (f *Failure) Error() string {
	if f.Status == 0 {
		return f.Err.Error()
	}
	return fmt.Sprintf("HTTP %d: %v", f.Status, f.Err)
}

func (f *Failure) Unwrap() error { return f.Err }

// failure reads what the service asked for from its response.
func failure(resp *http.Response, err error, now time.Time) error {
	if resp == nil {
		return &Failure{Err: err}
	}
	return &Failure{Status: resp.StatusCode, After: RetryAfter(resp.Header, now), Err: err}
}

// RetryAfter is the wait a response asks for: Retry-After in seconds or as
// a date, else the rate limit's reset once none is left (GitHub's
// x-ratelimit-remaining and x-ratelimit-reset, GitLab's RateLimit-Remaining
// and RateLimit-Reset); 0 when it asks for none.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.Atoi(v); err == nil && s >= 0 {
			return time.Duration(s) * time.Second
		}
		if t, err := http.ParseTime(v); err == nil && t.After(now) {
			return t.Sub(now)
		}
	}
	for _, k := range [][2]string{{"X-Ratelimit-Remaining", "X-Ratelimit-Reset"}, {"RateLimit-Remaining", "RateLimit-Reset"}} {
		if h.Get(k[0]) != "0" {
			continue
		}
		if s, err := strconv.ParseInt(h.Get(k[1]), 10, 64); err == nil && time.Unix(s, 0).After(now) {
			return time.Unix(s, 0).Sub(now)
		}
	}
	return 0
}

// Status is the failure's HTTP status, 0 when none came.
func Status(err error) int {
	var f *Failure
	if errors.As(err, &f) {
		return f.Status
	}
	return 0
}
