// Package snowplow stands in for gitlab.com/gitlab-org/labkit/v2/events/snowplow,
// which the Go module proxy refuses. GitLab Runner sends billing events
// through it only when [usage_log.snowplow] is configured; the real-fleet
// suite configures none, so NewEmitter refuses.
package snowplow

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/oauth2"

	"gitlab.com/gitlab-org/labkit/v2/events/snowplow/metrics"
)

// SendResult is one batch's delivery.
type SendResult struct {
	EventCount int
	StatusCode int
	Err        error
}

// SendCallback receives the batches' deliveries.
type SendCallback func(successes, failures []SendResult)

// EmitterOption configures an Emitter.
type EmitterOption func(*Emitter)

// WithCallback sets the delivery callback.
func WithCallback(SendCallback) EmitterOption { return func(*Emitter) {} }

// WithTokenSource sets the collector's credentials.
func WithTokenSource(oauth2.TokenSource) EmitterOption { return func(*Emitter) {} }

// WithMetricsCollectorOptions configures the emitter's metrics.
func WithMetricsCollectorOptions(...metrics.CollectorOption) EmitterOption {
	return func(*Emitter) {}
}

// Emitter is never made: NewEmitter always fails.
type Emitter struct{}

// NewEmitter fails: Snowplow usage logging is not in this build.
func NewEmitter(string, ...EmitterOption) (*Emitter, error) {
	return nil, errors.New("snowplow usage logging is not in this build of gitlab-runner")
}

// Collector is never reached (no Emitter exists).
func (*Emitter) Collector() prometheus.Collector { return nil }

// Stop is never reached (no Emitter exists).
func (*Emitter) Stop() {}

// Tracker is never made.
type Tracker struct{}

// NewTracker is never reached (no Emitter exists).
func NewTracker(string, *Emitter) (*Tracker, error) {
	return nil, errors.New("snowplow usage logging is not in this build of gitlab-runner")
}

// BillingEventRequiredInput is a billing event's required part.
type BillingEventRequiredInput struct {
	Category, EventType, Realm, UnitOfMeasure string
	Quantity                                  float64
}

// BillingEventOptionalInput is a billing event's optional part.
type BillingEventOptionalInput struct {
	Subject, DeploymentType, InstanceID, UniqueInstanceID   string
	Metadata                                                map[string]any
	ProjectID, NamespaceID, RootNamespaceID, OrganizationID int64
}

// TrackBillingEventWithOptionalInput is never reached (no Tracker exists).
func (*Tracker) TrackBillingEventWithOptionalInput(BillingEventRequiredInput, BillingEventOptionalInput) error {
	return errors.New("snowplow usage logging is not in this build of gitlab-runner")
}

// Stop is never reached (no Tracker exists).
func (*Tracker) Stop() {}
