package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// components in start order; down ends them in reverse.
var components = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "registry", "containerd", "kubelet", "certmanager"}

// up starts the cluster, or does nothing when every component runs and the
// API server is ready. A half-running cluster is torn down first.
// EventTTL is the node cluster's --event-ttl.
const EventTTL = time.Minute

func up(ctx context.Context, l layout) error {
	if healthy(ctx, l) {
		logStep("cluster already up: KUBECONFIG=%s", l.kubeconfig("admin"))
		return nil
	}
	if err := down(ctx, l); err != nil {
		return fmt.Errorf("clearing the previous cluster: %w", err)
	}
	// down keeps the last cluster's logs for a look after a failure; a new
	// cluster starts new ones.
	if err := os.RemoveAll(l.path("logs")); err != nil {
		return err
	}
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return err
	}
	if err := writePKI(l.dir); err != nil {
		return err
	}
	if err := writeConfigs(l); err != nil {
		return err
	}
	if err := addAPIServerAddress(); err != nil {
		return err
	}
	steps := []func(context.Context, layout) error{
		startEtcd, startAPIServer, startControllers, startRegistry, startContainerd, startKubelet, startCertManager,
	}
	for _, step := range steps {
		if err := step(ctx, l); err != nil {
			return err
		}
	}
	logStep("cluster up: KUBECONFIG=%s", l.kubeconfig("admin"))
	return nil
}

// healthy reports whether every component runs and the API server answers.
func healthy(ctx context.Context, l layout) bool {
	for _, c := range components {
		if _, ok := running(l, c); !ok {
			return false
		}
	}
	cs, err := clientset(l, "admin")
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil
}

func clientset(l layout, who string) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", l.kubeconfig(who))
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

func startEtcd(ctx context.Context, l layout) error {
	client := fmt.Sprintf("http://127.0.0.1:%d", etcdClientPort)
	err := startLogged(l, "etcd", l.bin("etcd"), []string{
		"--data-dir=" + l.path("etcd"), "--name=" + nodeName,
		"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
		"--listen-peer-urls=" + fmt.Sprintf("http://127.0.0.1:%d", etcdPeerPort),
		"--initial-advertise-peer-urls=" + fmt.Sprintf("http://127.0.0.1:%d", etcdPeerPort),
		"--initial-cluster=" + fmt.Sprintf("%s=http://127.0.0.1:%d", nodeName, etcdPeerPort),
		// A throwaway cluster: fsync only costs time here.
		"--unsafe-no-fsync=true",
	})
	if err != nil {
		return err
	}
	return waitFor(ctx, l, "etcd", 30*time.Second, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, client+"/health", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

func startAPIServer(ctx context.Context, l layout) error {
	err := startLogged(l, "kube-apiserver", l.bin("kube-apiserver"), []string{
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", etcdClientPort),
		"--bind-address=" + apiserverIP, "--advertise-address=" + apiserverIP,
		"--secure-port=" + strconv.Itoa(apiserverPort),
		"--tls-cert-file=" + l.pki("apiserver.crt"), "--tls-private-key-file=" + l.pki("apiserver.key"),
		"--client-ca-file=" + l.pki("ca.crt"),
		"--kubelet-client-certificate=" + l.pki("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + l.pki("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + l.pki("sa.pub"),
		"--service-account-signing-key-file=" + l.pki("sa.key"),
		"--service-cluster-ip-range=" + serviceCIDR,
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		// Admission webhooks are dialled at the Service's endpoint pod IPs
		// on the CNI bridge (buildServiceResolver in cmd/kube-apiserver),
		// so the webhook runs as pods behind its Service without kube-proxy.
		"--enable-aggregator-routing=true",
		"--profiling=false",
		// Events expire within the suite, as they do after an hour in a
		// real cluster: the death records must not depend on them.
		"--event-ttl=" + EventTTL.String(),
	})
	if err != nil {
		return err
	}
	cs, err := clientset(l, "admin")
	if err != nil {
		return err
	}
	return waitFor(ctx, l, "kube-apiserver", 90*time.Second, func(ctx context.Context) (bool, error) {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil, nil
	})
}

// startControllers starts the controller manager (service accounts and
// their tokens, the garbage collector, pod GC, EndpointSlices for the
// webhook's Service, the namespace controller) and the scheduler. Each
// controller uses its own ServiceAccount's credentials, so the guard sees
// the namespace controller and pod GC under their real usernames.
func startControllers(ctx context.Context, l layout) error {
	err := startLogged(l, "kube-controller-manager", l.bin("kube-controller-manager"), []string{
		"--kubeconfig=" + l.kubeconfig("controller-manager"),
		"--authentication-kubeconfig=" + l.kubeconfig("controller-manager"),
		"--authorization-kubeconfig=" + l.kubeconfig("controller-manager"),
		"--service-account-private-key-file=" + l.pki("sa.key"),
		"--root-ca-file=" + l.pki("ca.crt"),
		"--cluster-signing-cert-file=" + l.pki("ca.crt"), "--cluster-signing-key-file=" + l.pki("ca.key"),
		"--use-service-account-credentials=true",
		"--service-cluster-ip-range=" + serviceCIDR,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0",
	})
	if err != nil {
		return err
	}
	err = startLogged(l, "kube-scheduler", l.bin("kube-scheduler"), []string{
		"--kubeconfig=" + l.kubeconfig("scheduler"),
		"--authentication-kubeconfig=" + l.kubeconfig("scheduler"),
		"--authorization-kubeconfig=" + l.kubeconfig("scheduler"),
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0",
	})
	if err != nil {
		return err
	}
	cs, err := clientset(l, "admin")
	if err != nil {
		return err
	}
	// Pods are refused until the namespace's default ServiceAccount exists.
	return waitFor(ctx, l, "kube-controller-manager", 60*time.Second, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

func startContainerd(ctx context.Context, l layout) error {
	if err := startLogged(l, "containerd", "containerd", []string{"--config=" + l.path("containerd.toml")}); err != nil {
		return err
	}
	err := waitFor(ctx, l, "containerd", 30*time.Second, func(ctx context.Context) (bool, error) {
		return exec.CommandContext(ctx, "ctr", "--address", l.containerdSocket(), "version").Run() == nil, nil
	})
	if err != nil {
		return err
	}
	return importImages(ctx, l, "pause.tar")
}

func startKubelet(ctx context.Context, l layout) error {
	err := startLogged(l, "kubelet", l.bin("kubelet"), []string{
		"--config=" + l.path("kubelet.yaml"),
		"--kubeconfig=" + l.kubeconfig("kubelet"),
		"--root-dir=" + kubeletRoot(l),
		"--hostname-override=" + nodeName,
		"--node-ip=" + apiserverIP,
	})
	if err != nil {
		return err
	}
	cs, err := clientset(l, "admin")
	if err != nil {
		return err
	}
	return waitFor(ctx, l, "kubelet", 90*time.Second, func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
}

// waitFor polls cond every 250ms until it holds, the named component
// exits, or timeout passes; on failure it shows the component's log tail.
func waitFor(ctx context.Context, l layout, name string, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if _, ok := running(l, name); !ok {
			return false, fmt.Errorf("%s exited", name)
		}
		return cond(ctx)
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w\n%s", name, err, tail(l.log(name), 15))
	}
	logStep("%s ready in %.1fs", name, time.Since(start).Seconds())
	return nil
}

// tail returns the last n lines of a log file, indented.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + path + ":\n    " + strings.Join(lines, "\n    ")
}
