package apitest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
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

// Metrics is one reading of a set of metric families, by name: a scrape of
// a server's /metrics (Scrape) or an in-process registry's (Gathered).
type Metrics map[string]*dto.MetricFamily

// Scrape reads the server's /metrics with its scraper's token, parsed with
// Prometheus' own text parser.
func (s *Server) Scrape() (Metrics, error) {
	resp, err := s.GetMetrics(s.MetricsToken)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// Counter is the sum of the series of name that carry labels, in one
// scrape of the server.
func (s *Server) Counter(name string, labels map[string]string) (float64, error) {
	m, err := s.Scrape()
	if err != nil {
		return 0, err
	}
	v, _ := m.Sum(name, labels)
	return v, nil
}

// Gathered is what a registry holds now.
func Gathered(g prometheus.Gatherer) (Metrics, error) {
	mfs, err := g.Gather()
	out := Metrics{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out, err
}

// Sample is one series' labels and value: a counter's or a gauge's value,
// a histogram's or a summary's sum of observations.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Series is every series of name.
func (m Metrics) Series(name string) []Sample {
	var out []Sample
	for _, s := range m[name].GetMetric() {
		labels := map[string]string{}
		for _, l := range s.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		v := s.GetCounter().GetValue() + s.GetGauge().GetValue() + s.GetUntyped().GetValue() +
			s.GetHistogram().GetSampleSum() + s.GetSummary().GetSampleSum()
		out = append(out, Sample{Labels: labels, Value: v})
	}
	return out
}

// Sum is the sum of the series of name that carry every label of labels
// (all of them when labels is empty), and whether there was any.
func (m Metrics) Sum(name string, labels map[string]string) (float64, bool) {
	return m.SumWhere(name, func(have map[string]string) bool {
		for k, v := range labels {
			if got, ok := have[k]; !ok || got != v {
				return false
			}
		}
		return true
	})
}

// SumWhere is the sum of the series of name whose labels match, and
// whether there was any.
func (m Metrics) SumWhere(name string, match func(labels map[string]string) bool) (float64, bool) {
	sum, found := 0.0, false
	for _, s := range m.Series(name) {
		if match(s.Labels) {
			sum, found = sum+s.Value, true
		}
	}
	return sum, found
}
