package guard

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/podtest"
)

func connectReq(t *testing.T, sub, ns, name, container, user string) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Connect, Namespace: ns, Name: name, SubResource: sub,
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		UserInfo: authenticationv1.UserInfo{Username: user},
		Object:   raw(t, corev1.PodExecOptions{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodExecOptions"}, Container: container, Command: []string{"sh"}}),
	}}
}

// serviceProxy is req made a proxy to the service of the same name.
func serviceProxy(req admission.Request) admission.Request {
	req.Resource.Resource = "services"
	return req
}

func TestConnectHandler(t *testing.T) {
	busy := podtest.Runner("ci", "busy").Running("runner").Obj()
	h, rec := newTestHandler(busy)
	ctx := context.Background()
	cases := []struct {
		name    string
		req     admission.Request
		allowed bool
		code    int32
		says    string
	}{
		{name: "exec into a busy runner is refused with 403", req: connectReq(t, "exec", "ci", "busy", "runner", reaper),
			code: http.StatusForbidden, says: `refused exec into runner container "runner" of pod ci/busy`},
		{name: "attach into it too", req: connectReq(t, "attach", "ci", "busy", "runner", reaper),
			code: http.StatusForbidden, says: "refused attach"},
		{name: "a pod that is gone is not judged", req: connectReq(t, "exec", "ci", "gone", "runner", reaper), allowed: true},
		{name: "a port-forward to a busy runner pod is refused with 403", req: connectReq(t, "portforward", "ci", "busy", "", reaper),
			code: http.StatusForbidden, says: "refused portforward to pod ci/busy"},
		{name: "a proxied request to a port of a busy runner pod is refused, read as the pod it names",
			req: connectReq(t, "proxy", "ci", "busy:2375", "", reaper), code: http.StatusForbidden, says: "refused proxy to pod ci/busy"},
		{name: "naming a scheme does not get a proxied request past it",
			req: connectReq(t, "proxy", "ci", "https:busy:2376", "", reaper), code: http.StatusForbidden, says: "refused proxy"},
		{name: "a proxy name the API server cannot split is malformed",
			req: connectReq(t, "proxy", "ci", "ftp:busy:21", "", reaper), code: http.StatusBadRequest, says: "not [scheme:]pod[:port]"},
		{name: "a proxy to a service is not judged here", req: serviceProxy(connectReq(t, "proxy", "ci", "busy", "", reaper)), allowed: true},
		{name: "a review without a pod name is malformed", req: connectReq(t, "exec", "ci", "", "runner", reaper), code: http.StatusBadRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.Connect().Handle(ctx, tc.req)
			assert.Equal(t, tc.allowed, r.Allowed)
			if !tc.allowed {
				assert.Equal(t, tc.code, r.Result.Code)
				assert.Contains(t, r.Result.Message, tc.says)
			}
		})
	}
	assert.Empty(t, rec.Events, "a connect review writes no Event")
}

// The chart registers exec and attach once per mode, as deletes: the guard
// answers in the mode of the registration that called, whatever its config
// says (a plain install's config is warn), so an enforce namespace without
// a mode label still refuses.
func TestConnectAnswersInTheModeOfTheRegistrationThatCalled(t *testing.T) {
	busy := podtest.Runner("ci", "busy").Running("runner").Obj()
	h, _ := newTestHandler(busy)
	h.Config.Guard.Mode = config.ModeWarn
	req := connectReq(t, "exec", "ci", "busy", "runner", reaper)
	assert.False(t, h.after.handler(in(config.ModeEnforce, h.Connect().Review)).Handle(context.Background(), req).Allowed, "called by the enforce registration")
	resp := h.after.handler(in(config.ModeWarn, h.Connect().Review)).Handle(context.Background(), req)
	assert.True(t, resp.Allowed, "called by the warn registration")
	assert.NotEmpty(t, resp.Warnings, "warn mode says what enforce would refuse")
	assert.Equal(t, "/validate-runner-connect/enforce", ConnectModePath(config.ModeEnforce))
}

// A connection whose pod cannot be read before its answer is due is
// refused for now (429), never left for the API server's failure policy,
// Ignore on this path, to let through.
func TestAConnectionWhosePodCannotBeReadInTimeIsRefusedForNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		busy := podtest.Runner("ci", "busy").Running("runner").Obj()
		r, _, release := heldReads(t, busy)
		defer close(release)
		h := NewHandler(configtest.Enforcing(), r, nil, events.NewFakeRecorder(1))
		ctx, cancel := context.WithTimeout(context.Background(), AnswerDue("5s", 0))
		defer cancel()
		resp, after := h.Connect().Review(ctx, connectReq(t, "exec", "ci", "busy", "runner", reaper))
		assert.False(t, resp.Allowed)
		assert.Equal(t, int32(http.StatusTooManyRequests), resp.Result.Code)
		assert.Contains(t, resp.Result.Message, "cannot read pod ci/busy in time")
		assert.Nil(t, after, "nothing is kept of a review not judged")
	})
}
