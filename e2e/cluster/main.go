package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

const usage = `usage: cluster [flags] up|install|down

  up       start the one-node cluster, its registry and cert-manager (no-op when healthy)
  install  release to the cluster's registry and install the chart from it (after up)
  down     end the cluster and remove what it left on the host
`

func main() {
	repo, _ := os.Getwd()
	fs := flag.NewFlagSet("cluster", flag.ExitOnError)
	fs.Usage = func() { fmt.Fprint(os.Stderr, usage); fs.PrintDefaults() }
	dir := fs.String("dir", filepath.Join(repo, ".cache", "cluster"), "state folder of the cluster")
	kube := fs.String("kube-bin", filepath.Join(repo, ".cache", "kube", "v1.37.2", "bin"), "folder of the Kubernetes binaries")
	images := fs.String("images", filepath.Join(repo, ".cache", "images"), "folder of the image tarballs")
	cm := fs.String("certmanager", filepath.Join(repo, ".cache", "certmanager", "certmanager"), "the e2e/certmanager binary")
	helm := fs.String("helm", filepath.Join(repo, ".cache", "bin", "helm"), "the helm binary (install)")
	crane := fs.String("crane", filepath.Join(repo, ".cache", "bin", "crane"), "the crane binary (the cluster's registry)")
	var sets multiFlag
	fs.Var(&sets, "set", "a chart value for install, as for helm --set (repeatable)")
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() != 1 {
		fs.Usage()
		os.Exit(2)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "cluster: must run as root (containerd, the kubelet, mounts, cgroups)")
		os.Exit(1)
	}
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	l := layout{dir: abs(*dir), kube: abs(*kube), images: abs(*images), cm: abs(*cm), crane: abs(*crane), repo: repo}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	switch fs.Arg(0) {
	case "up":
		err = up(ctx, l)
	case "install":
		err = install(ctx, l, abs(*helm), sets)
	case "down":
		err = down(context.Background(), l)
	default:
		fs.Usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

var started = time.Now()

// logStep says what the harness is doing, with the time since it began.
func logStep(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(started).Seconds(), fmt.Sprintf(format, args...))
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func isExists(err error) bool { return apierrors.IsAlreadyExists(err) }
