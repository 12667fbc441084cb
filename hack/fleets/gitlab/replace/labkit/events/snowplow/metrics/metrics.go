// Package metrics stands in for labkit's Snowplow emitter metrics (see the
// snowplow package: never reached in this build).
package metrics

// CollectorOption configures the emitter's metrics.
type CollectorOption func()

// WithCollectorNamespace names the metrics' namespace.
func WithCollectorNamespace(string) CollectorOption { return func() {} }

// WithCollectorBatchDeliveryDurationBuckets sets the histogram's buckets.
func WithCollectorBatchDeliveryDurationBuckets([]float64) CollectorOption { return func() {} }
