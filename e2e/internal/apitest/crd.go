package apitest

import (
	"strings"

	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

// EphemeralRunnerCRD is the shape of ARC's EphemeralRunner that the guard
// and the recorder read: a namespaced actions.github.com/v1alpha1 object
// whose status (a subresource) carries the job as ARC's listener writes it
// (apis/actions.github.com/v1alpha1/ephemeralrunner_types.go). The rest of
// ARC's schema is left open.
func EphemeralRunnerCRD() *apiextensionsv1.CustomResourceDefinition {
	open := &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "ephemeralrunners.actions.github.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "actions.github.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "ephemeralrunners", Singular: "ephemeralrunner", Kind: "EphemeralRunner", ListKind: "EphemeralRunnerList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": *open,
						"status": {Type: "object", XPreserveUnknownFields: ptr.To(true), Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"jobRequestId":      {Type: "integer", Format: "int64"},
							"jobId":             {Type: "string"},
							"workflowRunId":     {Type: "integer", Format: "int64"},
							"jobRepositoryName": {Type: "string"},
							"jobWorkflowRef":    {Type: "string"},
							"jobDisplayName":    {Type: "string"},
						}},
					},
				}},
			}},
		},
	}
}

// EphemeralRunner is an empty ARC EphemeralRunner named name in ns, for a
// test to fill in and create.
func EphemeralRunner(ns, name string) *unstructured.Unstructured {
	er := &unstructured.Unstructured{}
	er.SetAPIVersion(arcscaleset.Group + "/v1alpha1")
	er.SetKind(arcscaleset.Kind)
	er.SetNamespace(ns)
	er.SetName(name)
	return er
}

// CertificateCRD is cert-manager's Certificate as far as runnerguard
// check reads it: a namespaced cert-manager.io/v1 object whose status (a
// subresource) carries the Ready condition. The rest of the schema is left
// open; no cert-manager runs beside the API-server suite, so a test writes
// the status cert-manager would.
func CertificateCRD() *apiextensionsv1.CustomResourceDefinition {
	return openCRD("cert-manager.io", "v1", "Certificate", "certificates")
}

// TaskRunCRD is the shape of Tekton's TaskRun that the recorder reads: a
// namespaced tekton.dev/v1 object whose status (a subresource) carries
// its conditions as Tekton's controller writes them (knative's Status).
// The rest of Tekton's schema is left open.
func TaskRunCRD() *apiextensionsv1.CustomResourceDefinition {
	return openCRD("tekton.dev", "v1", "TaskRun", "taskruns")
}

// openCRD is a namespaced CRD of group/version and kind, its spec and its
// status (a subresource) left open.
func openCRD(group, version, kind, plural string) *apiextensionsv1.CustomResourceDefinition {
	open := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: version, Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": open, "status": open},
				}},
			}},
		},
	}
}
