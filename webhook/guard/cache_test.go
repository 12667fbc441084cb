package guard

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
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

func TestStripNodeKeepsTheDrainDeadlineOnly(t *testing.T) {
	in := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "u", ResourceVersion: "7",
		Labels: map[string]string{"pool": "ci"}, Annotations: map[string]string{"other": "x", runnerpod.DrainDeadline: "2026-11-01T12:01:00Z", runnerpod.DrainDeadlineBy: "alice"}}}
	out, err := StripNode(in)
	require.NoError(t, err)
	got := out.(*metav1.PartialObjectMetadata)
	assert.Equal(t, metav1.ObjectMeta{Name: "n", UID: "u", ResourceVersion: "7",
		Annotations: map[string]string{runnerpod.DrainDeadline: "2026-11-01T12:01:00Z", runnerpod.DrainDeadlineBy: "alice"}}, got.ObjectMeta)
	none, err := StripNode(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "m", Annotations: map[string]string{"other": "x"}}})
	require.NoError(t, err)
	assert.Nil(t, none.(*metav1.PartialObjectMetadata).Annotations)
}
