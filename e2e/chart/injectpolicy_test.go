package chart_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

const (
	mapAPI      = "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"
	evictionAPI = "lifecycle.k8s.io/v1alpha1/Eviction"
)

// renderOn renders the chart as for a server that serves apis.
func renderOn(t *testing.T, h helm, apis []string, values ...string) objects {
	t.Helper()
	args := []string{"template", release, chartDir, "--namespace", namespace}
	for _, a := range apis {
		args = append(args, "--api-versions", a)
	}
	dir := valuesDir(t)
	for i, v := range values {
		f := filepath.Join(dir, fmt.Sprintf("values-%d.yaml", i))
		require.NoError(t, os.WriteFile(f, []byte(v), 0o600))
		args = append(args, "--values", f)
	}
	out, err := h.run(args...)
	require.NoError(t, err, "helm template")
	return parse(t, out)
}

// The injection runs in the API server where it serves
// MutatingAdmissionPolicy and not eviction requests (whose responder entry
// only the webhook writes), or where the value says; the injector's
// webhook is then called only for the pods the policy did not instrument,
// and the policy records the creator in place of the creator's policy.
func TestTheInjectionPolicyIsRenderedWhereItCanRun(t *testing.T) {
	h := helm4(t)
	for _, c := range []struct {
		name   string
		apis   []string
		values string
		want   bool
	}{
		{"an older server", nil, "", false},
		{"1.36 and later", []string{mapAPI}, "", true},
		{"eviction requests served", []string{mapAPI, evictionAPI}, "", false},
		{"turned off", []string{mapAPI}, "inject: {policy: false, creatorPolicy: false}", false},
		{"turned on", nil, "inject: {policy: true}", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs := renderOn(t, h, c.apis, c.values)
			assert.Equal(t, c.want, objs.find("MutatingAdmissionPolicy", release+"-inject") != nil, "the policy")
			assert.Equal(t, c.want, objs.find("MutatingAdmissionPolicyBinding", release+"-inject") != nil, "its binding")
			if c.want {
				assert.Nil(t, objs.find("MutatingAdmissionPolicy", release+"-creator"), "the policy records the creator itself, in its one patch")
				var p admissionregistrationv1.MutatingAdmissionPolicy
				objs.get(t, "MutatingAdmissionPolicy", release+"-inject", &p)
				assert.Contains(t, p.Spec.Mutations[0].JSONPatch.Expression, `jsonpatch.escapeKey("runnerguard.io/created-by"), value: request.userInfo.username`)
			}
			var m admissionregistrationv1.MutatingWebhookConfiguration
			objs.get(t, "MutatingWebhookConfiguration", release, &m)
			handedOff := false
			for _, mc := range m.Webhooks[0].MatchConditions {
				handedOff = handedOff || mc.Name == "not-instrumented-by-the-policy"
			}
			assert.Equal(t, c.want, handedOff, "the webhook is called only for pods handed to it")
		})
	}
}

// The policy's sidecar runs with --interval as the injector writes it
// (time.Duration's String), so that the webhook takes a copy of an
// instrumented pod's sidecar for its own.
func TestThePolicysSidecarIntervalIsWrittenAsGoWritesIt(t *testing.T) {
	h := helm4(t)
	arg := regexp.MustCompile(`--interval=([^\\"]+)`)
	for _, in := range []string{"5s", "100ms", "1m", "90s", "1.5s", "1h30m", "2h", "1m0.25s", "750ms"} {
		t.Run(in, func(t *testing.T) {
			objs := renderOn(t, h, nil, "inject: {policy: true, vitals: {interval: \""+in+"\"}}")
			var p admissionregistrationv1.MutatingAdmissionPolicy
			objs.get(t, "MutatingAdmissionPolicy", release+"-inject", &p)
			var sidecar string
			for _, v := range p.Spec.Variables {
				if v.Name == "vitalsSidecar" {
					sidecar = v.Expression
				}
			}
			got := arg.FindStringSubmatch(sidecar)
			require.Len(t, got, 2, "no --interval in %s", sidecar)
			d, err := time.ParseDuration(in)
			require.NoError(t, err)
			assert.Equal(t, d.String(), got[1])
		})
	}
}
