package guard

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/internal/podtest"
)

func TestStripPodLeavesOtherObjectsAlone(t *testing.T) {
	ns := &corev1.Namespace{}
	got, err := StripPod(ns)
	require.NoError(t, err)
	assert.Same(t, ns, got)
}

func TestTheGuardsMetadataOfARunnerPodKeepsItsNameUIDAndDeletionOnly(t *testing.T) {
	pod := podtest.GitLab("ci", "r").Running("build").Deleted(podtest.Start, 30).Obj()
	m := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: *pod.ObjectMeta.DeepCopy()}
	m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	m.ResourceVersion = "42"
	out, err := StripPod(m)
	require.NoError(t, err)
	assert.Equal(t, &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "r", UID: pod.UID, ResourceVersion: "42", DeletionTimestamp: pod.DeletionTimestamp}}, out)
}
