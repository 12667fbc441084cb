package notify

import (
	"context"
	"fmt"
	"net/http"
	"sync"
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

// secretFresh is how long a credential read from its Secret is used
// before it is read again: a rotation is taken up within it, and a fleet's
// thousands of reports cost the API server a read a minute per Secret, not
// one per report.
const secretFresh = time.Minute

// Senders builds each configured destination's sender. Credentials are
// read from their Secrets (in cfg.SecretNamespace, through reader: the API
// server, never a cache of every Secret the leader may read) and kept for
// secretFresh, so a rotation needs no restart.
func Senders(cfg config.Reports, reader client.Reader, transport http.RoundTripper, now func() time.Time) map[string]Sender {
	secret := func(name, key string) func(ctx context.Context) ([]byte, error) {
		var (
			mu   sync.Mutex
			v    []byte
			read time.Time
		)
		return func(ctx context.Context) ([]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			if v != nil && now().Sub(read) < secretFresh {
				return v, nil
			}
			s := &corev1.Secret{}
			if err := reader.Get(ctx, client.ObjectKey{Namespace: cfg.SecretNamespace, Name: name}, s); err != nil {
				return nil, fmt.Errorf("reading Secret %s/%s: %w", cfg.SecretNamespace, name, err)
			}
			got, ok := s.Data[key]
			if !ok || len(got) == 0 {
				v = nil
				return nil, fmt.Errorf("secret %s/%s has no %s", cfg.SecretNamespace, name, key)
			}
			v, read = got, now()
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
