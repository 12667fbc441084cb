//go:build scale

package scale

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
)

// controlPlane is this run's kube-apiserver and etcd, as processes (other
// runs on the machine use the same binaries: each is told apart by its
// port) and the admin client that reads the API server's own metrics.
type controlPlane struct {
	apiserver, etcd, kwok int
	// dcm: kube-controller-manager running the disruption controller.
	dcm   *disruption
	admin *kubernetes.Clientset
	// meta lists pods as metadata only, for the waits on many pods.
	meta metadata.Interface
}

// cpSnap is the control plane at one moment.
type cpSnap struct {
	at             time.Time
	apiserver      procUsage
	etcd, kwok     procUsage
	dcm            procUsage
	requests, pods int64
	// dAdds and dWork: the disruption controller's queue adds and work
	// seconds so far.
	dAdds, dWork float64
}

// findControlPlane finds the pids of c's kube-apiserver and etcd in /proc
// by their binary's name and the port on their command line.
func findControlPlane(c *apitest.Cluster) (controlPlane, error) {
	meta, err := metadata.NewForConfig(c.Config)
	if err != nil {
		return controlPlane{}, err
	}
	cp := controlPlane{admin: c.Clientset, meta: meta}
	apiPort := "--secure-port=" + c.Env.ControlPlane.APIServer.SecureServing.Port
	etcdURL := c.Env.ControlPlane.Etcd.URL.String()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		raw, err := os.ReadFile(p)
		if err != nil || len(raw) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		var pid int
		if _, err := fmt.Sscanf(p, "/proc/%d/cmdline", &pid); err != nil {
			continue
		}
		line := strings.Join(args, " ")
		switch filepath.Base(args[0]) {
		case "kube-apiserver":
			if strings.Contains(line, apiPort+" ") || strings.HasSuffix(line, apiPort) {
				cp.apiserver = pid
			}
		case "etcd":
			if strings.Contains(line, etcdURL) {
				cp.etcd = pid
			}
		}
	}
	if cp.apiserver == 0 || cp.etcd == 0 {
		return cp, fmt.Errorf("kube-apiserver (%s) pid %d, etcd (%s) pid %d: not found", apiPort, cp.apiserver, etcdURL, cp.etcd)
	}
	return cp, nil
}

// take reads both processes, the API server's request counter and how
// many pods the cluster holds.
func (cp controlPlane) take(ctx context.Context) cpSnap {
	s := cpSnap{at: time.Now()}
	s.apiserver, _ = readProc(cp.apiserver)
	s.etcd, _ = readProc(cp.etcd)
	s.kwok, _ = readProc(cp.kwok)
	if cp.dcm != nil {
		s.dcm, _ = readProc(cp.dcm.Pid())
		s.dAdds, s.dWork, _, _ = cp.dcm.queue(ctx)
	}
	s.requests, _ = apiRequests(ctx, cp.admin)
	s.pods, _ = podsInCluster(ctx, cp.admin)
	return s
}

// apiRequests sums apiserver_request_total over all its labels: every
// request the API server answered, whoever made it.
func apiRequests(ctx context.Context, admin *kubernetes.Clientset) (int64, error) {
	raw, err := admin.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(raw)))
	if err != nil {
		return 0, err
	}
	var n float64
	for _, m := range fams["apiserver_request_total"].GetMetric() {
		n += m.GetCounter().GetValue()
	}
	return int64(n), nil
}

// cpPhase is what the control plane spent from a to b.
type cpPhase struct {
	wall            time.Duration
	apiCPU, etcdCPU float64
	kwokCPU         float64
	// dcmCPU, dAdds, dWork: the disruption controller's process CPU, its
	// queue's adds and work seconds.
	dcmCPU, dAdds, dWork float64
	apiRSS, etcdRSS      int64 // at the phase's end
	requests, podsEnd    int64
}

func phaseOf(a, b cpSnap) cpPhase {
	return cpPhase{wall: b.at.Sub(a.at).Round(time.Millisecond), apiCPU: b.apiserver.CPU - a.apiserver.CPU,
		etcdCPU: b.etcd.CPU - a.etcd.CPU, kwokCPU: b.kwok.CPU - a.kwok.CPU,
		dcmCPU: b.dcm.CPU - a.dcm.CPU, dAdds: b.dAdds - a.dAdds, dWork: b.dWork - a.dWork, apiRSS: b.apiserver.RSS, etcdRSS: b.etcd.RSS,
		requests: b.requests - a.requests, podsEnd: b.pods}
}
