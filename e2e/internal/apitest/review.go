package apitest

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/internal/podtest"
)

// BulkyRunnerPod is the JSON of a busy runner pod of about size bytes less
// 16 KiB (room for the AdmissionReview around it), the bulk in its runner's
// env: many small objects, the costliest shape for a webhook to decode.
func BulkyRunnerPod(ns, name string, size int) ([]byte, error) {
	pod := podtest.Runner(ns, name).RunningSince("runner", time.Now()).Obj()
	pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	value := strings.Repeat("x", 80)
	entry, err := json.Marshal(corev1.EnvVar{Name: "E000000", Value: value})
	if err != nil {
		return nil, err
	}
	for i := range (size - 16<<10) / (len(entry) + 1) {
		pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: fmt.Sprintf("E%06d", i), Value: value})
	}
	return json.Marshal(pod)
}
