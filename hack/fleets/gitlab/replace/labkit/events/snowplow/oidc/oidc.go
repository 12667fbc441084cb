// Package oidc stands in for labkit's Snowplow OIDC token source (see the
// snowplow package: never reached in this build).
package oidc

import (
	"errors"

	"golang.org/x/oauth2"
)

// Option configures the source.
type Option func()

// WithSkipIfUnsupportedCloud is accepted and ignored.
func WithSkipIfUnsupportedCloud(bool) Option { return func() {} }

type source struct{}

func (source) Token() (*oauth2.Token, error) {
	return nil, errors.New("snowplow OIDC is not in this build of gitlab-runner")
}

// NewSource returns a source that never yields a token.
func NewSource(...Option) oauth2.TokenSource { return source{} }
