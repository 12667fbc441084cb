package death

import (
	"fmt"
	"hash/fnv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
)

// Record is one runner's death: the API's DeathRecord and the namespace
// it happened in, which the RunnerDeath object keeps in its metadata.
type Record struct {
	Namespace            string `json:"namespace"`
	v1alpha1.DeathRecord `json:",inline"`
	// Reports is the reporter's account (the object's status), read back
	// with the record; Object does not write it.
	Reports []v1alpha1.Report `json:"reports,omitempty"`
	// FleetView is the CI system's own account of the job (the object's
	// status), read back with the record; Object does not write it.
	FleetView *v1alpha1.FleetView `json:"fleetView,omitempty"`
}

// Key identifies a death: one record per pod UID and container start. A
// container that never got an ID (it failed to be created) is told apart by
// its name and end time.
func (r Record) Key() string {
	if r.ContainerID != "" {
		return r.UID + "/" + r.ContainerID
	}
	end := ""
	if r.FinishedAt != nil {
		end = r.FinishedAt.UTC().Format(time.RFC3339)
	}
	return r.UID + "/" + r.Container + "@" + end
}

// Labels on a RunnerDeath: the class lets retention list records as
// metadata only; the pod UID finds a pod's records; JobLabel, a job's.
const (
	ClassLabel  = "runnerguard.io/class"
	PodUIDLabel = "runnerguard.io/pod-uid"
)

// ObjectName is the name of the RunnerDeath of the death with key on pod. It
// is a function of the death alone, so every replica, restart and leader
// writes the same object: the API server's AlreadyExists is what keeps a
// death recorded exactly once.
func ObjectName(podName, key string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	if len(podName) > 200 {
		podName = podName[:200]
	}
	return fmt.Sprintf("%s.%016x", podName, h.Sum64())
}

// Name is the name of the RunnerDeath that keeps r: its death's, so the API
// server keeps one per death.
func (r Record) Name() string { return ObjectName(r.Pod, r.Key()) }

// Object is the RunnerDeath that keeps r.
func (r Record) Object() *v1alpha1.RunnerDeath {
	o := &v1alpha1.RunnerDeath{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: r.Namespace, Name: r.Name(),
			Labels: map[string]string{ClassLabel: r.Class, PodUIDLabel: r.UID},
		},
		Record: r.DeathRecord,
	}
	if id := jobLabelValue(r.Job); id != "" {
		o.Labels[JobLabel] = id
	}
	return o
}

// FromObject reads the record a RunnerDeath keeps.
func FromObject(o *v1alpha1.RunnerDeath) Record {
	return Record{Namespace: o.Namespace, DeathRecord: o.Record, Reports: o.Status.Reports, FleetView: o.Status.FleetView}
}
