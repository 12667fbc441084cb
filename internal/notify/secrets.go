package notify

import (
	"context"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/internal/config"
)

// The Secrets' keys.
const (
	KeyPrivateKey = "privateKey"
	KeyToken      = "token"
	KeyHMAC       = "hmacKey"
)

// Senders builds each configured destination's sender. Credentials are
// read from their Secrets (in cfg.SecretNamespace, through reader: the API
// server, never a cache) at each report, so a rotation needs no restart.
func Senders(cfg config.Reports, reader client.Reader, transport http.RoundTripper, now func() time.Time) map[string]Sender {
	secret := func(name, key string) func(ctx context.Context) ([]byte, error) {
		return func(ctx context.Context) ([]byte, error) {
			s := &corev1.Secret{}
			if err := reader.Get(ctx, client.ObjectKey{Namespace: cfg.SecretNamespace, Name: name}, s); err != nil {
				return nil, fmt.Errorf("reading Secret %s/%s: %w", cfg.SecretNamespace, name, err)
			}
			v, ok := s.Data[key]
			if !ok || len(v) == 0 {
				return nil, fmt.Errorf("secret %s/%s has no %s", cfg.SecretNamespace, name, key)
			}
			return v, nil
		}
	}
	out := map[string]Sender{}
	if g := cfg.GitHub; g != nil {
		out[GitHub] = &GitHubSender{BaseURL: g.URL, AppID: g.AppID, InstallationID: g.InstallationID, Key: secret(g.Secret, KeyPrivateKey), Transport: transport, Now: now}
	}
	if g := cfg.GitLab; g != nil {
		token := secret(g.Secret, KeyToken)
		out[GitLab] = &GitLabSender{BaseURL: g.URL, Now: now, HTTPClient: &http.Client{Transport: transport, Timeout: 30 * time.Second},
			Token: func(ctx context.Context) (string, error) { v, err := token(ctx); return string(v), err }}
	}
	if b := cfg.Buildkite; b != nil {
		token := secret(b.Secret, KeyToken)
		out[Buildkite] = &BuildkiteSender{BaseURL: b.URL, Now: now, HTTPClient: &http.Client{Transport: transport, Timeout: 30 * time.Second},
			Token: func(ctx context.Context) (string, error) { v, err := token(ctx); return string(v), err }}
	}
	for _, s := range cfg.Sinks {
		key := secret(s.Secret, KeyHMAC)
		out[sinkPrefix+s.Name] = &EventSender{URL: s.URL, Transport: transport, Now: now,
			Key: func(ctx context.Context) ([]byte, error) {
				v, err := key(ctx)
				if err != nil {
					return nil, err
				}
				return HMACKey(v)
			}}
	}
	return out
}
