package apitest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MetricsReader is the ServiceAccount that scrapes metrics, bound to the
// chart's <fullname>-metrics-reader.
const MetricsReader = "metrics-scraper"

// metricsReaderToken makes the scraper's ServiceAccount, binds it to role
// (the chart's metrics reader) and returns a token for it.
func metricsReaderToken(ctx context.Context, c *Cluster, role *rbacv1.ClusterRole) (string, error) {
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: MetricsReader, Namespace: ReleaseNamespace}},
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: MetricsReader, Namespace: ReleaseNamespace}}
	for _, o := range []client.Object{role, binding, sa} {
		if err := c.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", err
		}
	}
	tr, err := c.Clientset.CoreV1().ServiceAccounts(ReleaseNamespace).CreateToken(ctx, MetricsReader, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting the scraper's token: %w", err)
	}
	return tr.Status.Token, nil
}

// MetricsURL is the server's metrics endpoint, served over HTTPS with the
// webhook's serving certificate.
func (s *Server) MetricsURL() string {
	return fmt.Sprintf("https://127.0.0.1:%d/metrics", s.metricsPort)
}

// HTTPClient trusts the server's certificate, over HTTP/1.1 as the server
// speaks nothing else.
func (s *Server) HTTPClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CAData)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}

// GetMetrics gets the metrics endpoint with token (none when empty).
func (s *Server) GetMetrics(token string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, s.MetricsURL(), nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return s.HTTPClient().Do(req)
}
