package report

// What `why` says of the vitals sidecar's memory reading.

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
)

// memory says whose memory the vitals read (the runner container's own
// cgroup, or only the pod's), and the pod's beside it.
func memory(b *strings.Builder, r death.Record) {
	v := r.Vitals
	if v == nil {
		b.WriteString("  memory: no vitals reading was left (no sidecar, or it was not stopped cleanly)\n")
		return
	}
	if v.Scope == death.ScopeContainer {
		fmt.Fprintf(b, "  memory of the runner container %q (its own cgroup, %s):%s\n", r.Container, v.Cgroup, reading(v.Memory))
		if v.Pod != nil {
			fmt.Fprintf(b, "  memory of the pod (every container and the vitals sidecar):%s\n", reading(*v.Pod))
		}
	} else {
		fmt.Fprintf(b, "  memory of the pod (every container and the vitals sidecar, %s; the runner's own cgroup was not seen):%s\n", v.Cgroup, reading(v.Memory))
	}
	switch {
	case r.OOMConfirmed != nil && *r.OOMConfirmed:
		b.WriteString("  the vitals confirm an OOM kill\n")
	case r.OOMConfirmed != nil:
		b.WriteString("  the vitals counted no OOM kill: the kill came from elsewhere\n")
	case death.Class(r.Class) == death.CgroupOOM && v.OOMKill == 0:
		b.WriteString(uncounted(v))
	}
	if name, ok := watchNames[v.OOMWatch]; ok && v.Cgroup == "v1" {
		fmt.Fprintf(b, "  OOM kills watched by %s\n", name)
	}
}

// watchNames say how the sidecar learned of OOM kills on cgroup v1.
var watchNames = map[string]string{
	"notified": "the kernel's OOM notification (every kill counted)",
	"polled":   "a poll of the counters (a kill is missed when the runtime removes the victim's cgroup between two reads)",
}

// uncounted says why a cgroup-oom death's vitals count no kill.
func uncounted(v *v1alpha1.Vitals) string {
	if v.OOMWatch == "notified" {
		return "  the vitals counted no OOM kill here, though the kernel's OOM notification was registered: the kill came before the sidecar registered on the runner's cgroup, or in another cgroup; the kubelet's reason OOMKilled decides the class\n"
	}
	return "  the vitals counted no OOM kill here: on cgroup v1 a kill is counted only in the victim's own cgroup, which the runtime can remove before the sidecar reads it (the sidecar polled; with inject.vitals.oomNotify it registers the kernel's OOM notification, which counts every kill); the kubelet's reason OOMKilled decides the class\n"
}

func reading(m v1alpha1.Memory) string {
	var b strings.Builder
	b.WriteString(peakUnknown(m))
	if m.Peak != nil {
		fmt.Fprintf(&b, " peak %s", quantity(*m.Peak))
		if m.PeakObserved {
			b.WriteString(" (highest seen; the kernel has no memory.peak)")
		}
	}
	if m.Limit != nil {
		fmt.Fprintf(&b, " of %s limit", quantity(*m.Limit))
	} else {
		b.WriteString(", no limit")
	}
	fmt.Fprintf(&b, ", oom %d, oom_kill %d", m.OOM, m.OOMKill)
	if m.OOMKillAt != nil {
		fmt.Fprintf(&b, ", first OOM kill seen at %s", m.OOMKillAt.UTC().Format(time.RFC3339Nano))
	}
	return b.String()
}

// quantity prints a byte count as Kubernetes prints memory (128Mi).
func quantity(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}
