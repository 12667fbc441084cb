//go:build load

package load

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
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
	// nsReader is where they go to a handler that decodes the whole pod in
	// the review, as a webhook built on the usual types does, and refuses:
	// the floor of a refusal by a webhook that reads the pod (the guard
	// decodes less of it: webhook/guard/decode.go).
	nsReader              = "load-reader"
	readerLabel           = "runnerguard.io/load-reader"
	nothingReadRefusePath = "/validate-read-refuse"
	// nsNothingDelete is where runner pods' DELETEs go, through the
	// guard's delete webhook as the chart renders it, to a handler that
	// allows without reading the review: the floor of a DELETE the guard
	// allows.
	nsNothingDelete    = "load-nothing-delete"
	nothingDeleteLabel = "runnerguard.io/load-nothing-delete"
	nothingDeletePath  = "/validate-nothing-delete"
)

// nothingServer is controller-runtime's webhook server, set up as
// runnerguard's (its own TLS port on loopback, HTTP/1.1 only) and, like
// runnerguard, in a process of its own (this test binary, run again with
// nothingServeEnv set: serveNothing), serving admission handlers that
// allow every review with no patch, refuse it without reading it, or
// decode its pod and refuse it. A
// floor served from the test process, which also sends the timed requests,
// would leave out what crossing to another process costs.
type nothingServer struct {
	port  int
	proc  *apitest.Process
	stats func() (calls, seconds float64, err error)
}

// nothingServeEnv, set to "<port> <certDir>", makes this test binary serve
// the do-nothing webhooks instead of running the tests.
const (
	nothingServeEnv = "LOAD_SERVE_NOTHING"
	nothingStats    = "/stats"
)

// counter counts the reviews answered and the time spent answering them,
// from receiving each to writing its answer, as controller-runtime's
// latency histogram does for runnerguard's server.
type counter struct{ calls, nanos atomic.Int64 }

func (c *counter) count(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h.ServeHTTP(w, r)
		c.nanos.Add(int64(time.Since(start)))
		c.calls.Add(1)
	})
}

// serveNothing serves the do-nothing webhooks until it is signalled, with
// the counts at nothingStats.
func serveNothing(args string) int {
	var port int
	var certDir string
	if _, err := fmt.Sscan(args, &port, &certDir); err != nil {
		fmt.Fprintf(os.Stderr, "%s=%q: want a port and a certificate directory: %v\n", nothingServeEnv, args, err)
		return 2
	}
	// A bare server: it logs nothing.
	ctrl.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: certDir,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}})
	var c counter
	allow := &admission.Webhook{Handler: admission.HandlerFunc(
		func(context.Context, admission.Request) admission.Response { return admission.Allowed("") })}
	srv.Register(nothingPath, c.count(allow))
	srv.Register(nothingEvictionPath, c.count(allow))
	srv.Register(nothingDeletePath, c.count(allow))
	refuse := &admission.Webhook{Handler: admission.HandlerFunc(
		func(context.Context, admission.Request) admission.Response {
			return admission.Denied("refused by a webhook that does not look")
		})}
	srv.Register(nothingRefusePath, c.count(refuse))
	// What every webhook that judges a pod's DELETE pays besides: decoding
	// the pod the API server sends.
	readRefuse := &admission.Webhook{Handler: admission.HandlerFunc(
		func(_ context.Context, req admission.Request) admission.Response {
			var pod corev1.Pod
			if err := json.Unmarshal(req.OldObject.Raw, &pod); err != nil {
				return admission.Errored(http.StatusBadRequest, err)
			}
			return admission.Denied("refused by a webhook that reads only the pod's name: " + pod.Name)
		})}
	srv.Register(nothingReadRefusePath, c.count(readRefuse))
	srv.Register(nothingStats, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "%d %d", c.calls.Load(), c.nanos.Load())
	}))
	if err := srv.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "the do-nothing webhook:", err)
		return 1
	}
	return 0
}

// startNothing runs the do-nothing webhooks in a process of their own, with
// envtest's serving certificate (the one runnerguard's server uses), and
// waits until they answer.
func startNothing(ctx context.Context) (*nothingServer, error) {
	wio := cluster.Env.WebhookInstallOptions
	port, err := apitest.FreePort()
	if err != nil {
		return nil, err
	}
	artifacts, err := apitest.Artifacts()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(artifacts, "load-nothing.log")
	proc, err := apitest.StartProcess("the do-nothing webhook", os.Args[0], logPath,
		[]string{fmt.Sprintf("%s=%d %s", nothingServeEnv, port, wio.LocalServingCertDir)})
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(wio.LocalServingCAData)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	statsURL := fmt.Sprintf("https://127.0.0.1:%d%s", port, nothingStats)
	n := &nothingServer{port: port, proc: proc}
	n.stats = func() (float64, float64, error) {
		resp, err := hc.Get(statsURL)
		if err != nil {
			return 0, 0, err
		}
		defer resp.Body.Close()
		var calls, nanos int64
		if _, err := fmt.Fscan(resp.Body, &calls, &nanos); err != nil {
			return 0, 0, fmt.Errorf("the do-nothing webhook's counts: %w", err)
		}
		return float64(calls), time.Duration(nanos).Seconds(), nil
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		_, _, err := n.stats()
		return err == nil, nil
	})
	if err != nil {
		n.stop()
		return nil, fmt.Errorf("the do-nothing webhook does not answer (its log: %s): %w", logPath, err)
	}
	return n, nil
}

func (n *nothingServer) stop() { n.proc.Stop(context.Background()) }

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
	// And once more, answered by a refusal that first decodes the pod.
	reader := *del.DeepCopy()
	readURL := fmt.Sprintf("https://127.0.0.1:%d%s", n.port, nothingReadRefusePath)
	reader.Name = "delete.reader.load.runnerguard.io"
	reader.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{readerLabel: "true"}}
	reader.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &readURL, CABundle: cluster.Env.WebhookInstallOptions.LocalServingCAData}
	// And once more, answered by an allowance.
	allowDel := *del.DeepCopy()
	allowURL := fmt.Sprintf("https://127.0.0.1:%d%s", n.port, nothingDeletePath)
	allowDel.Name = "delete.nothing.load.runnerguard.io"
	allowDel.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{nothingDeleteLabel: "true"}}
	allowDel.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &allowURL, CABundle: cluster.Env.WebhookInstallOptions.LocalServingCAData}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "load-nothing"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{ev, del, reader, allowDel}}
	if err := cluster.Client.Create(ctx, vwc); err != nil {
		return fmt.Errorf("registering the do-nothing eviction webhook: %w", err)
	}
	return nil
}
