//go:build scale

package scale

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
)

// arcUser is ARC's scale-set controller as its chart names it (release
// arc in namespace arc-systems): it creates the runner pods and deletes
// them, idle ones to scale in, finished ones after their job.
const arcUser = "system:serviceaccount:arc-systems:arc-gha-rs-controller"

// installEphemeralRunnerCRD installs the part of ARC's EphemeralRunner the
// guard reads (as e2e/api): namespaced actions.github.com/v1alpha1 with a
// status subresource carrying jobRequestId and jobId.
func installEphemeralRunnerCRD(cfg *rest.Config) error {
	_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{apitest.EphemeralRunnerCRD()}})
	return err
}

// createARCRunner creates r's EphemeralRunner (as ARC's controller does,
// before the pod) and, for a busy one, assigns it a job through the status
// subresource as ARC's listener does; then r's pod, owned by it, as the
// scale-set preset recognises it: the actions-ephemeral-runner label and a
// controller reference to the EphemeralRunner by UID.
func createARCRunner(ctx context.Context, admin client.Client, arc *kubernetes.Clientset, r *runner, job int64) error {
	er := apitest.EphemeralRunner(r.ns, r.name)
	if err := admin.Create(ctx, er); err != nil {
		return err
	}
	if job != 0 {
		patch := fmt.Sprintf(`{"status":{"jobRequestId":%d,"jobId":"job-%d"}}`, job, job)
		if err := admin.Status().Patch(ctx, er, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			return err
		}
	}
	pod := killPod(r)
	pod.Labels[arcscaleset.Label] = "True"
	pod.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: arcscaleset.Group + "/v1alpha1", Kind: arcscaleset.Kind, Name: r.name,
		UID: er.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
	created, err := arc.CoreV1().Pods(r.ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	r.uid = created.UID
	return nil
}

// clearJob is ARC's listener at the job's end: the EphemeralRunner has no
// job any more.
func clearJob(ctx context.Context, admin client.Client, r *runner) error {
	er := apitest.EphemeralRunner(r.ns, r.name)
	return admin.Status().Patch(ctx, er, client.RawPatch(types.MergePatchType, []byte(`{"status":{"jobRequestId":null,"jobId":null}}`)))
}

// deleteAs deletes r's pod as c with the pod's own grace period, as ARC's
// controller does.
func deleteAs(ctx context.Context, c *kubernetes.Clientset, r *runner) error {
	return c.CoreV1().Pods(r.ns).Delete(ctx, r.name, metav1.DeleteOptions{})
}
