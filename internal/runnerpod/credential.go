package runnerpod

import (
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
)

// Credential is the credential a request was made with, as the API server
// states it in the requester's extra (authentication.kubernetes.io/
// credential-id: "JTI=<id>" for a ServiceAccount token it issued), or ""
// when it states none (a legacy Secret token, an impersonated requester:
// impersonating an extra takes "impersonate" on userextras, which no
// built-in namespace role grants).
func Credential(extra map[string]authenticationv1.ExtraValue) string {
	if v := extra[user.CredentialIDKey]; len(v) == 1 {
		return v[0]
	}
	return ""
}

// BoundPod is the pod a request's ServiceAccount token is bound to, as the
// API server states it in the requester's extra, or "" for none.
func BoundPod(extra map[string]authenticationv1.ExtraValue) string {
	if v := extra[serviceaccount.PodNameKey]; len(v) == 1 {
		return v[0]
	}
	return ""
}
