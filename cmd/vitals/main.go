// Command vitals is the runner pod's vitals sidecar: it streams the pod's
// memory cgroup readings as JSON lines on stdout, keeps them in a shared
// folder and leaves a final reading in its termination message on SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/procfs"

	"github.com/runnerguard/runnerguard/vitals"
	"github.com/runnerguard/runnerguard/vitals/cgroup"
)

func main() {
	root := flag.String("cgroup-root", "/host/cgroup", "where the node's cgroup filesystem is mounted (read-only)")
	uid := flag.String("pod-uid", os.Getenv("POD_UID"), "UID of the pod whose cgroup to read (default $POD_UID)")
	path := flag.String("cgroup-path", "", "read this cgroup directory (absolute, or relative to the memory hierarchy) instead of finding the pod's")
	interval := flag.Duration("interval", 5*time.Second, "time between readings; OOM kills are reported at once")
	outDir := flag.String("out-dir", "", "shared folder for memory.events, memory.peak and vitals.json (empty: none)")
	termPath := flag.String("termination-message-path", "/dev/termination-log", "where the final reading goes on SIGTERM")
	probeAddr := flag.String("probe-addr", "", "serve the readiness probe ("+vitals.ProbePath+": not ready while the pod stalls at its memory limit) at this address (empty: none)")
	flag.Parse()

	// stdout carries the readings; logs go to stderr.
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With(
		"pod", os.Getenv("POD_NAME"), "namespace", os.Getenv("POD_NAMESPACE"), "node", os.Getenv("NODE_NAME"))

	// The sidecar's own cgroup names the pod's on v1 (no cgroup namespace).
	var self []procfs.Cgroup
	if p, err := procfs.Self(); err == nil {
		self, _ = p.Cgroups()
	}
	reader := cgroup.NewPod(cgroup.Options{Root: *root, PodUID: *uid, Path: *path, Self: self, Log: log})

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var probe *vitals.Probe
	if *probeAddr != "" {
		probe = &vitals.Probe{}
		serveProbe(ctx, *probeAddr, probe, log)
	}
	err := vitals.Run(ctx, reader, os.Stdout, vitals.Options{
		Interval: *interval, OutDir: *outDir, TerminationPath: *termPath, Log: log, Probe: probe,
	})
	if err != nil {
		log.Error("vitals stopped", "err", err)
		os.Exit(1)
	}
}

// serveProbe serves the readiness probe until ctx ends. A failure to listen
// is logged and the readings go on: the sidecar outlives trouble, and the
// kubelet then sees it not ready, which the log line explains.
func serveProbe(ctx context.Context, addr string, probe *vitals.Probe, log *slog.Logger) {
	srv := &http.Server{Addr: addr, Handler: probe, ReadHeaderTimeout: 2 * time.Second}
	context.AfterFunc(ctx, func() { srv.Close() })
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("cannot serve the readiness probe; the kubelet will see the sidecar not ready", "addr", addr, "err", err)
		}
	}()
}
