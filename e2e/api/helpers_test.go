//go:build e2e

package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/internal/registration"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Principals the suite acts as.
const (
	reaper         = "system:serviceaccount:ci-infra:orphan-reaper"
	ownerPrincipal = "system:serviceaccount:gitlab:gitlab-manager"
)

// as returns a client acting as user. The group system:masters lets any
// test user act; the webhooks see the username.
func as(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(adminCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters", "system:authenticated"}}
	cfg.WarningHandler = rest.NoWarnings{}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	require.NoError(t, err)
	return c
}

// warningsAs returns a client acting as user and the admission warnings it
// receives.
func warningsAs(t *testing.T, user string) (client.Client, *[]string) {
	t.Helper()
	cfg := rest.CopyConfig(adminCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters", "system:authenticated"}}
	got := &[]string{}
	cfg.WarningHandler = warningCollector{got}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	require.NoError(t, err)
	return c, got
}

type warningCollector struct{ out *[]string }

func (w warningCollector) HandleWarningHeader(_ int, _ string, text string) {
	*w.out = append(*w.out, text)
}

// newNamespace makes an opted-in namespace, removed after the test.
func newNamespace(t *testing.T, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   "e2e-" + strings.ToLower(rand.String(6)),
		Labels: map[string]string{runnerpod.EnabledNamespaceLabel: "true"},
	}}
	for k, v := range labels {
		ns.Labels[k] = v
	}
	require.NoError(t, admin.Create(context.Background(), ns))
	t.Cleanup(func() { _ = admin.Delete(context.Background(), ns) })
	return ns.Name
}

// create creates pod (as admin unless c is given) and then writes status as
// the kubelet would, through the status subresource.
func create(t *testing.T, c client.Client, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	if c == nil {
		c = admin
	}
	status := pod.Status
	pod = pod.DeepCopy()
	pod.UID, pod.Status, pod.ResourceVersion = "", corev1.PodStatus{}, ""
	if pod.Spec.NodeName == "" {
		// A pod bound to a node is deleted gracefully, as runner pods are;
		// an unbound one would be removed at once.
		pod.Spec.NodeName = "node-e2e"
	}
	require.NoError(t, c.Create(ctx, pod))
	if status.Phase != "" || len(status.ContainerStatuses) > 0 {
		// The leader may have marked the new pod already (safe to evict):
		// written on the pod as it is now.
		writeStatus(t, pod, status)
	}
	t.Cleanup(func() { forceRemove(pod) })
	return marksSettled(t, pod)
}

// forceRemove removes a pod for good as the exempt namespace controller
// (grace 0, as the kubelet's final delete).
func forceRemove(pod *corev1.Pod) {
	cfg := rest.CopyConfig(adminCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:kube-system:namespace-controller", Groups: []string{"system:masters"}}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return
	}
	_ = c.Delete(context.Background(), pod, client.GracePeriodSeconds(0))
}

// deletePod deletes as c, returning the API error.
func deletePod(c client.Client, pod *corev1.Pod, opts ...client.DeleteOption) error {
	return c.Delete(context.Background(), pod, opts...)
}

// evict evicts the pod through the eviction subresource as c.
func evict(c client.Client, pod *corev1.Pod, dryRun bool) error {
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}
	if dryRun {
		ev.DeleteOptions = &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}
	return c.SubResource("eviction").Create(context.Background(), p, ev)
}

// alive reports whether the pod is still there and not terminating.
func alive(t *testing.T, pod *corev1.Pod) bool {
	t.Helper()
	got := &corev1.Pod{}
	err := admin.Get(context.Background(), client.ObjectKeyFromObject(pod), got)
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return got.DeletionTimestamp == nil
}

// podEvents lists the events.k8s.io Events about a pod.
func podEvents(t *testing.T, pod *corev1.Pod) []eventsv1.Event {
	t.Helper()
	list := &eventsv1.EventList{}
	require.NoError(t, admin.List(context.Background(), list, client.InNamespace(pod.Namespace)))
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == pod.Name && e.Regarding.Kind == "Pod" {
			out = append(out, e)
		}
	}
	return out
}

// patience is how long a test waits for a condition the product brings
// about: how long a failure takes to show, never a bound on how fast the
// machine is. A wait ends as soon as its condition holds, and a loaded
// machine (a CI runner, or every suite of make test at once) takes many
// times what an idle one does.
const patience = 2 * time.Minute

// eventually waits for cond, as the recorder writes Events asynchronously.
func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	require.Eventually(t, cond, patience, 100*time.Millisecond, what)
}

// calls counts the reviews the guard answered while f ran. The server
// counts a review once its handler has returned, just after the answer
// reached the API server, so a client can see its request end before the
// count moves: the count is read again until it has held still for
// settle (for at most patience, should reviews of others keep coming).
func calls(t *testing.T, f func()) float64 {
	t.Helper()
	before, err := server.WebhookCalls(registration.GuardPath)
	require.NoError(t, err)
	f()
	const settle = 300 * time.Millisecond
	after, err := server.WebhookCalls(registration.GuardPath)
	require.NoError(t, err)
	for still, end := time.Now(), time.Now().Add(patience); time.Since(still) < settle && time.Now().Before(end); {
		time.Sleep(25 * time.Millisecond)
		now, err := server.WebhookCalls(registration.GuardPath)
		require.NoError(t, err)
		if now != after {
			after, still = now, time.Now()
		}
	}
	return after - before
}

func statusCode(err error) int32 {
	if s, ok := err.(apierrors.APIStatus); ok {
		return s.Status().Code
	}
	return 0
}

// deleteReview is an AdmissionReview of a DELETE of pod by user, as the API
// server would send it, for posting to the webhook directly.
func deleteReview(t *testing.T, pod *corev1.Pod, user string) *admissionv1.AdmissionReview {
	t.Helper()
	raw, err := json.Marshal(pod)
	require.NoError(t, err)
	return &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID(rand.String(12)), Operation: admissionv1.Delete, Namespace: pod.Namespace, Name: pod.Name,
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			UserInfo:  authenticationv1.UserInfo{Username: user},
			OldObject: runtime.RawExtension{Raw: raw},
		},
	}
}

// askGuard posts review to the guard as any client on the pod network
// could, with no credentials, and returns its answer.
func askGuard(t *testing.T, review *admissionv1.AdmissionReview) *admissionv1.AdmissionResponse {
	t.Helper()
	body, err := json.Marshal(review)
	require.NoError(t, err)
	code, raw := postReview(t, registration.GuardPath, body)
	require.Equal(t, http.StatusOK, code, string(raw))
	out := &admissionv1.AdmissionReview{}
	require.NoError(t, json.Unmarshal(raw, out))
	require.NotNil(t, out.Response)
	return out.Response
}
