//go:build load

package load

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runnerguard/runnerguard/e2e/internal/registration"
	"github.com/runnerguard/runnerguard/internal/config"
)

// nsNothing is where pod CREATEs go through a mutating webhook that does
// nothing: the floor every mutating webhook pays in kube-apiserver (the
// review's encoding, TLS on loopback, the answer's decoding), against
// which the injector's own cost is measured.
const (
	nsNothing    = "load-nothing"
	nothingLabel = "runnerguard.io/load-nothing"
	nothingPath  = "/mutate-nothing"
	// nothingEvictionPath is its validating twin, registered as the
	// guard's eviction webhook is: the floor of an allowed eviction.
	nothingEvictionPath = "/validate-nothing"
	// nsRefuser is where busy runners' DELETEs go, through the guard's
	// delete webhook as the chart renders it, to a handler that refuses
	// without reading the review: the floor of any webhook's refusal.
	nsRefuser         = "load-refuser"
	refuserLabel      = "runnerguard.io/load-refuser"
	nothingRefusePath = "/validate-refuse"
)

// nothingServer is controller-runtime's webhook server, set up as
// runnerguard's (its own TLS port on loopback, HTTP/1.1 only), serving an
// admission handler that allows every review with no patch. It runs in
// the test process, which also sends the timed requests; runnerguard runs
// as its own process.
type nothingServer struct {
	port   int
	cancel context.CancelFunc
	done   chan error
	// calls and nanos count the reviews answered and the time spent
	// answering them, as controller-runtime's latency histogram does for
	// runnerguard's server.
	calls, nanos atomic.Int64
}

// countReviews times each review from receiving it to writing its answer.
func (n *nothingServer) countReviews(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h.ServeHTTP(w, r)
		n.nanos.Add(int64(time.Since(start)))
		n.calls.Add(1)
	})
}

// stats are the reviews answered so far and the seconds spent on them, as
// Server.WebhookStats reports runnerguard's.
func (n *nothingServer) stats() (calls, seconds float64) {
	return float64(n.calls.Load()), time.Duration(n.nanos.Load()).Seconds()
}

// startNothing serves the do-nothing webhook with envtest's serving
// certificate, the one runnerguard's server uses, and waits until it
// answers.
func startNothing(ctx context.Context) (*nothingServer, error) {
	wio := cluster.Env.WebhookInstallOptions
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	n := &nothingServer{port: port, done: make(chan error, 1)}
	srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: wio.LocalServingCertDir,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}})
	allow := &admission.Webhook{Handler: admission.HandlerFunc(
		func(context.Context, admission.Request) admission.Response { return admission.Allowed("") })}
	srv.Register(nothingPath, n.countReviews(allow))
	srv.Register(nothingEvictionPath, n.countReviews(allow))
	refuse := &admission.Webhook{Handler: admission.HandlerFunc(
		func(context.Context, admission.Request) admission.Response {
			return admission.Denied("refused by a webhook that does not look")
		})}
	srv.Register(nothingRefusePath, n.countReviews(refuse))
	runCtx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go func() { n.done <- srv.Start(runCtx) }()
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		select {
		case err := <-n.done:
			return false, fmt.Errorf("the do-nothing webhook stopped: %w", err)
		default:
		}
		return srv.StartedChecker()(nil) == nil, nil
	})
	if err != nil {
		cancel()
		return nil, err
	}
	return n, nil
}

func (n *nothingServer) stop() {
	n.cancel()
	<-n.done
}

// register installs the do-nothing webhook as the injector is installed
// (the chart's, rendered by registration: the same rules, matchConditions, failurePolicy,
// sideEffects, timeout, reinvocation and namespaceSelector shape), for
// nsNothing only.
func (n *nothingServer) register(ctx context.Context, cfg config.Config) error {
	o := server.Options()
	o.Name = "load-nothing"
	o.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{nothingLabel: "true"}}
	url := fmt.Sprintf("https://127.0.0.1:%d%s", n.port, nothingPath)
	o.ClientConfig = func(string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: cluster.Env.WebhookInstallOptions.LocalServingCAData}
	}
	objs, err := registration.Render(cfg, o)
	if err != nil {
		return err
	}
	mwc := objs.Mutating
	mwc.Webhooks[0].Name = "nothing.load.runnerguard.io"
	if err := cluster.Client.Create(ctx, mwc); err != nil {
		return fmt.Errorf("registering the do-nothing webhook: %w", err)
	}
	// And the guard's eviction webhook, as the chart renders it, answered
	// by the do-nothing server.
	ev, err := objs.Webhook(registration.EvictionWebhook)
	if err != nil {
		return err
	}
	evURL := fmt.Sprintf("https://127.0.0.1:%d%s", n.port, nothingEvictionPath)
	ev.Name = "eviction.nothing.load.runnerguard.io"
	ev.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &evURL, CABundle: cluster.Env.WebhookInstallOptions.LocalServingCAData}
	// And the guard's delete webhook, as the chart renders it (its
	// matchConditions send it busy runners only), answered by a refusal.
	del, err := objs.Webhook(registration.DeleteWebhook)
	if err != nil {
		return err
	}
	delURL := fmt.Sprintf("https://127.0.0.1:%d%s", n.port, nothingRefusePath)
	del.Name = "delete.refuser.load.runnerguard.io"
	del.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{refuserLabel: "true"}}
	del.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &delURL, CABundle: cluster.Env.WebhookInstallOptions.LocalServingCAData}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "load-nothing"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{ev, del}}
	if err := cluster.Client.Create(ctx, vwc); err != nil {
		return fmt.Errorf("registering the do-nothing eviction webhook: %w", err)
	}
	return nil
}
