package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// fakeAPI speaks just enough of the Kubernetes API for the CLI's commands
// to reach their answers: discovery of the resources it reads through
// controller-runtime, reads of the objects it holds (any other named
// object is NotFound, any collection lists what it holds), and a
// SelfSubjectAccessReview that allows nothing. It is not the API server:
// e2e/api runs the commands against a real one.
type fakeAPI struct {
	resources []fakeResource
	// objects by their path, such as /api/v1/nodes/node-7.
	objects map[string]runtime.Object
}

type fakeResource struct {
	gv         schema.GroupVersion
	resource   string
	kind       string
	namespaced bool
}

func newFakeAPI() *fakeAPI {
	core := schema.GroupVersion{Version: "v1"}
	return &fakeAPI{objects: map[string]runtime.Object{}, resources: []fakeResource{
		{core, "pods", "Pod", true},
		{core, "nodes", "Node", false},
		{core, "namespaces", "Namespace", false},
		{core, "configmaps", "ConfigMap", true},
		{schema.GroupVersion{Group: "runnerguard.io", Version: "v1alpha1"}, "runnerdeaths", "RunnerDeath", true},
		{schema.GroupVersion{Group: "admissionregistration.k8s.io", Version: "v1"}, "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", false},
		{schema.GroupVersion{Group: "admissionregistration.k8s.io", Version: "v1"}, "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", false},
		{schema.GroupVersion{Group: "authorization.k8s.io", Version: "v1"}, "selfsubjectaccessreviews", "SelfSubjectAccessReview", false},
	}}
}

// add holds obj at path.
func (f *fakeAPI) add(path string, obj runtime.Object) { f.objects[path] = obj }

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch p := r.URL.Path; {
	case p == "/api":
		reply(w, http.StatusOK, metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}})
	case p == "/apis":
		reply(w, http.StatusOK, f.groups())
	case f.discovery(p) != nil:
		reply(w, http.StatusOK, f.discovery(p))
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/selfsubjectaccessreviews"):
		reply(w, http.StatusCreated, map[string]any{"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
			"status": map[string]any{"allowed": false}})
	case r.Method != http.MethodGet:
		reply(w, http.StatusMethodNotAllowed, status(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed))
	case f.objects[p] != nil:
		reply(w, http.StatusOK, f.objects[p])
	case f.collection(p) != nil:
		reply(w, http.StatusOK, f.list(p, f.collection(p)))
	default:
		reply(w, http.StatusNotFound, status(http.StatusNotFound, metav1.StatusReasonNotFound))
	}
}

func (f *fakeAPI) groups() metav1.APIGroupList {
	l := metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	seen := map[string]bool{}
	for _, r := range f.resources {
		if r.gv.Group != "" && !seen[r.gv.Group] {
			seen[r.gv.Group] = true
			v := metav1.GroupVersionForDiscovery{GroupVersion: r.gv.String(), Version: r.gv.Version}
			l.Groups = append(l.Groups, metav1.APIGroup{Name: r.gv.Group, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v})
		}
	}
	return l
}

// discovery is the resource list of the group version at path, nil when
// path is none.
func (f *fakeAPI) discovery(path string) *metav1.APIResourceList {
	var l *metav1.APIResourceList
	for _, r := range f.resources {
		if prefix(r.gv) != path {
			continue
		}
		if l == nil {
			l = &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: r.gv.String()}
		}
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: r.resource, Kind: r.kind, Namespaced: r.namespaced,
			Verbs: metav1.Verbs{"get", "list", "create", "patch", "delete"}})
	}
	return l
}

func prefix(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "/api/v1"
	}
	return "/apis/" + gv.String()
}

// collection is the resource whose collection path is, nil when none.
func (f *fakeAPI) collection(path string) *fakeResource {
	for i, r := range f.resources {
		rest, ok := strings.CutPrefix(path, prefix(r.gv)+"/")
		if !ok {
			continue
		}
		parts := strings.Split(rest, "/")
		if len(parts) == 1 && parts[0] == r.resource || r.namespaced && len(parts) == 3 && parts[0] == "namespaces" && parts[2] == r.resource {
			return &f.resources[i]
		}
	}
	return nil
}

// list is what the fake holds under path, as the resource's list.
func (f *fakeAPI) list(path string, r *fakeResource) map[string]any {
	items := []runtime.Object{}
	for p, obj := range f.objects {
		if strings.HasPrefix(p, path+"/") && !strings.Contains(strings.TrimPrefix(p, path+"/"), "/") {
			items = append(items, obj)
		}
	}
	return map[string]any{"kind": r.kind + "List", "apiVersion": r.gv.String(), "metadata": map[string]any{}, "items": items}
}

func status(code int32, reason metav1.StatusReason) metav1.Status {
	return metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Code: code, Reason: reason, Message: string(reason)}
}

func reply(w http.ResponseWriter, code int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// kubeconfigFor writes a kubeconfig of the server at url and points
// $KUBECONFIG at it.
func kubeconfigFor(t *testing.T, url string) {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["fake"] = &clientcmdapi.Cluster{Server: url}
	cfg.AuthInfos["fake"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["fake"] = &clientcmdapi.Context{Cluster: "fake", AuthInfo: "fake", Namespace: "ci"}
	cfg.CurrentContext = "fake"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	t.Setenv("KUBECONFIG", path)
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
}

// serveFake starts f and points $KUBECONFIG at it.
func serveFake(t *testing.T, f *fakeAPI) {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	kubeconfigFor(t, srv.URL)
}

// unreachable points $KUBECONFIG at a server that is gone.
func unreachable(t *testing.T) {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	kubeconfigFor(t, srv.URL)
}
