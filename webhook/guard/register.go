package guard

import (
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/printable"
	"github.com/runnerguard/runnerguard/internal/refusal"
)

// Path is where the webhook server serves the guard for a registration
// that does not say the mode: the namespace's label, else the configured
// mode, decides. The chart's registrations call ModePath instead.
const Path = "/validate-runner-pod"

// ModePath is where the guard answers in mode: the chart selects each
// namespace's mode in the API server (one registration per mode, by the
// namespace's runnerguard.io/mode label and the chart-wide rollout), so a
// mode switch takes effect there, at once, without the pods rolling or
// even running, and the guard follows the registration that called it.
func ModePath(mode config.Mode) string { return Path + "/" + string(mode) }

// A pod's refusals are written once none has come for refusalSettle, or
// refusalMaxHold after the first held: longer than the gap between a
// reaper's immediate retries, short enough that they are on the pod a
// moment after the last.
const (
	refusalSettle  = 500 * time.Millisecond
	refusalMaxHold = 2 * time.Second
)

// Register serves the guard at Path on mgr's webhook
// server. It reads evictions' pods through the API reader, not the cache:
// evictions are rare and must see the pod as it is now.
// With watcher, admitted deletions of running runners are noted for the pod
// watcher's records; without it, nobody would read or collect the notes.
// namespaces selects the webhooks' namespaces: the guard writes nothing
// about a review of a pod in any other (the API server sends none).
func Register(mgr manager.Manager, cfg config.Config, watcher bool, namespaces labels.Selector) error {
	h := NewHandler(cfg, mgr.GetAPIReader(), mgr.GetClient(), printable.Recorder(mgr.GetEventRecorder("runnerguard")))
	h.Selected = namespaces
	// The namespace's mode label, from the metadata informer the injector
	// reads too: a change takes effect without a restart.
	h.Namespaces = mgr.GetClient()
	if watcher {
		// The runner pods' metadata informer, which the server starts on
		// every replica (the watcher's own informer of runner pods runs on
		// the leader only).
		h.Pods = mgr.GetClient()
		// And the nodes' metadata, which the leader's marker reads too
		// (the chart grants list and watch of nodes with the watcher).
		h.Nodes = mgr.GetClient()
		// A note waits for the deletion it tells of.
		h.NotesAfterDeletion = true
		h.Refusals = refusal.NewWriter(mgr.GetAPIReader(), mgr.GetClient())
		// A reaper's refusals are written once they settle, not after each:
		// a write of the pod while the reaper retries makes the API server
		// review its next delete twice (refusal.Writer.Later).
		h.Refusals.Later, h.Refusals.Settle, h.Refusals.MaxHold = h.after.delayed, refusalSettle, refusalMaxHold
	} else {
		h.Writer, h.Notes = nil, nil
	}
	// What follows the answers (after.go), the notes among it, is
	// finished before the replica exits.
	if err := mgr.Add(h.after); err != nil {
		return err
	}
	// Every room's reviews are served through the one seam (after.go).
	srv := mgr.GetWebhookServer()
	srv.Register(Path, h.after.serve(h.Review))
	srv.Register(ConnectPath, h.after.serve(h.Connect().Review))
	for _, mode := range []config.Mode{config.ModeEnforce, config.ModeWarn} {
		srv.Register(ModePath(mode), h.after.serve(in(mode, h.Review)))
		srv.Register(ConnectModePath(mode), h.after.serve(in(mode, h.Connect().Review)))
	}
	for _, k := range presets.Keepers() {
		srv.Register(RecordPath(k.Traits().RecordKind), h.after.serve(h.Records(k).Review))
	}
	return nil
}
