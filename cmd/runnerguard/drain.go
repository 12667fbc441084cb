package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kdrain "k8s.io/kubectl/pkg/drain"

	"github.com/runnerguard/runnerguard/internal/drain"
	"github.com/runnerguard/runnerguard/internal/responder"
)

const drainSynopsis = "drain NODE... [--selector LABELS] [--deadline 2h|RFC3339 --reason TEXT] [--dry-run=none|client|server] [-o json|yaml]"

// drainOptions are drain's flags: kubectl drain's own, for the node's
// other pods, and runnerguard's for its runners.
type drainOptions struct {
	selector, podSelector   string
	deadline, reason        string
	dryRun                  string
	force, ignoreDaemonSets bool
	reportConditions        bool
	deleteEmptyDirData      bool
	timeout                 time.Duration
	gracePeriod             int
	install                 *installFlags
	out                     *output
	// interval is how often the drain looks at the nodes again.
	interval time.Duration
}

// drainLong is drain's help.
const drainLong = `drain cordons the nodes, evicts the runners the guard lets go (idle, finished,
never started) at once, so no new job lands there, and waits for the busy
ones, showing what still runs. With --deadline, the jobs still running then
are ended: the drain sets the override runnerguard.io/allow-delete with
--reason (and who ran the drain, on which nodes) on each, then evicts it,
so each death's record names you. The node's other pods go by kubectl
drain's rules (--force, --ignore-daemonsets, --delete-emptydir-data).
Before changing anything it asks the API server for each permission it
needs, and names those you lack. It tells runner pods by the presets of
the installation's ConfigMap (found by --release, --runnerguard-namespace),
or --config's, else every preset's defaults; its first line says which.

--dry-run=client prints what the drain would do and changes nothing;
--dry-run=server also asks the API server (and so the guard and the
disruption budgets) to judge each eviction it would make now, as a dry
run.

-o json or yaml prints, when the drain ends, its outcome node by node and
pod by pod (result, refusals, each pod evicted, ended, still waiting or,
in a dry run, what would be done); the log then goes to stderr.

Exit status: 0 drained (the jobs the deadline ended, if any, said in the
output); 5 --timeout passed with pods still on the nodes (they stay
cordoned); 6 refused, nothing changed (a permission missing, or kubectl's
rules refuse a pod); 1 failed; 2 a usage error.`

// newDrainCommand is `drain NODE...`: cordon, let idle runners go at once,
// wait for busy ones until their jobs end or the deadline.
func newDrainCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &drainOptions{}
	cmd := &cobra.Command{
		Use:   "drain NODE...",
		Short: "Drain nodes of runners: idle ones at once, busy ones when their jobs end or at a deadline",
		Long:  drainLong,
		Example: `  kubectl runnerguard drain node-7
  kubectl runnerguard drain --selector pool=ci --deadline 2h --reason "node pool upgrade"
  kubectl runnerguard drain node-7 --dry-run=server
  kubectl runnerguard drain node-7 --timeout 1h -o json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && o.selector == "" {
				return usageErrorf("drain takes node names or --selector: %s", drainSynopsis)
			}
			return nil
		},
	}
	k := newKube(cmd)
	o.bind(cmd.Flags())
	o.install = newInstallFlags(cmd, true)
	o.out = newValueOutput(cmd, false, "the drain's outcome node by node and pod by pod, the log going to stderr")
	cmd.ValidArgsFunction = k.completeNodes
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := o.out.validate(); err != nil {
			return err
		}
		if !slices.Contains([]string{"none", "client", "server"}, o.dryRun) {
			return usageErrorf("--dry-run=%q: none, client or server", o.dryRun)
		}
		if o.deadline != "" && o.reason == "" {
			return usageErrorf("--deadline ends the jobs still running then, and each one's record says why: give --reason")
		}
		if _, err := drain.ParseDeadline(o.deadline, time.Now()); o.deadline != "" && err != nil {
			return usageErrorf("%v", err)
		}
		human, _ := o.out.human()
		log := streams.Out
		if !human {
			log = streams.ErrOut
		}
		out, rep, err := runDrain(cmd.Context(), k, o, args, newScreen(log))
		if err != nil {
			return failed(err)
		}
		if !human {
			rep.Finish(out, o.dryRun)
			if err := o.out.printValue(streams.Out, rep); err != nil {
				return failed(fmt.Errorf("printing: %w", err))
			}
		}
		if code := out.Code(); code != drain.ExitDrained {
			return exitError{code, errors.New(outcomeText(out))}
		}
		return nil
	}
	return cmd
}

// bind defines drain's flags on f.
func (o *drainOptions) bind(f *pflag.FlagSet) {
	f.StringVarP(&o.selector, "selector", "l", "", "drain the nodes with these labels (a node pool)")
	f.StringVar(&o.podSelector, "pod-selector", "", "only pods with these labels, as kubectl drain's")
	f.StringVar(&o.deadline, "deadline", "", "end the jobs still running then: a duration (2h) or an RFC3339 time; none by default")
	f.StringVar(&o.reason, "reason", "", "why jobs are ended at the deadline: the override's reason, on each death's record (required with --deadline)")
	f.StringVar(&o.dryRun, "dry-run", "none", `"none", "client" (print what would happen, change nothing) or "server" (also have the API server judge each eviction, as a dry run); bare --dry-run is "client"`)
	f.Lookup("dry-run").NoOptDefVal = "client"
	f.BoolVar(&o.force, "force", false, "as kubectl drain: also evict the node's pods that no controller manages (runner pods need no --force)")
	f.BoolVar(&o.ignoreDaemonSets, "ignore-daemonsets", false, "as kubectl drain: leave DaemonSet-managed pods")
	f.BoolVar(&o.deleteEmptyDirData, "delete-emptydir-data", false, "as kubectl drain: evict pods with emptyDir data (runner pods need no flag)")
	f.BoolVar(&o.reportConditions, "report-node-conditions", false, "set the node-lifecycle conditions DrainInProgress and Drained on the nodes (Kubernetes 1.38's NodeLifecycleConditions)")
	f.DurationVar(&o.timeout, "timeout", 0, "give up after this long, leaving the nodes cordoned (0: never)")
	f.IntVar(&o.gracePeriod, "grace-period", -1, "as kubectl drain: seconds each pod is given to terminate (-1: the pod's own)")
	f.DurationVar(&o.interval, "interval", 2*time.Second, "how often the nodes are looked at again")
	_ = f.MarkHidden("interval")
}

func outcomeText(o drain.Outcome) string {
	switch {
	case o.Refused:
		return "the drain was refused; nothing was changed"
	case o.TimedOut:
		return "--timeout passed with pods still on the nodes; they stay cordoned"
	}
	return ""
}

// drainRun is one drain's state: what it reads and writes with.
type drainRun struct {
	o        *drainOptions
	cs       kubernetes.Interface
	runners  runnersOn
	helper   *kdrain.Helper
	screen   *screen
	report   *drain.Report
	nodes    []*corev1.Node
	names    []string
	deadline time.Time
	reason   string
	// requests drains through eviction requests, where the API server
	// serves them; nil: the drain evicts each runner pod itself.
	requests *requests
}

func runDrain(ctx context.Context, k kube, o *drainOptions, args []string, sc *screen) (drain.Outcome, *drain.Report, error) {
	cfg, err := k.restConfig()
	if err != nil {
		return drain.Outcome{}, nil, err
	}
	// The guard's admission warnings (a busy runner ended by the override)
	// are log lines, as kubectl prints them.
	cfg.WarningHandler = rest.NewWarningWriter(sc, rest.WarningWriterOptions{Deduplicate: true})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return drain.Outcome{}, nil, err
	}
	c, err := k.client()
	if err != nil {
		return drain.Outcome{}, nil, err
	}
	rgCfg, source, err := o.install.presets(ctx, cs)
	if err != nil {
		return drain.Outcome{}, nil, err
	}
	sc.Logf("runnerguard: %s", source)
	r := &drainRun{o: o, cs: cs, screen: sc, runners: runnersOn{cs: cs, c: c, presets: rgCfg.Presets, podSelector: o.podSelector}}
	if err := r.useRequests(cfg); err != nil {
		return drain.Outcome{}, nil, err
	}
	if refused, err := r.readNodes(ctx, args, source); err != nil || refused {
		return drain.Outcome{Refused: refused}, r.report, err
	}
	if o.deadline != "" {
		if err := r.setDeadline(ctx); err != nil {
			return drain.Outcome{}, nil, err
		}
	}
	r.helper = &kdrain.Helper{Ctx: ctx, Client: withoutRunners{cs, rgCfg.Presets}, Force: o.force, GracePeriodSeconds: o.gracePeriod,
		IgnoreAllDaemonSets: o.ignoreDaemonSets, DeleteEmptyDirData: o.deleteEmptyDirData, PodSelector: o.podSelector,
		EvictErrorRetryDelay: 5 * time.Second, Out: sc, ErrOut: sc}
	others, refused, err := r.check(ctx)
	if err != nil || refused {
		return drain.Outcome{Refused: refused}, r.report, err
	}
	if o.dryRun != "none" {
		return drain.Outcome{}, r.report, r.plan(ctx, others)
	}
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
		r.helper.Ctx = ctx
	}
	out, err := r.drain(ctx, others)
	return out, r.report, err
}

// readNodes reads the nodes to drain and starts the report; refused when
// not even the nodes may be read, a refusal like a missing permission found
// later, and nothing was changed.
func (r *drainRun) readNodes(ctx context.Context, args []string, source string) (bool, error) {
	var err error
	if r.nodes, err = nodes(ctx, r.cs, args, r.o.selector); err != nil {
		if apierrors.IsForbidden(err) {
			r.report = drain.NewReport(args)
			r.refuse("you may not read the nodes to drain (get and list on nodes): %v", err)
			r.report.Presets = source
			return true, nil
		}
		return false, err
	}
	for _, n := range r.nodes {
		r.names = append(r.names, n.Name)
	}
	r.report = drain.NewReport(r.names)
	r.report.Presets = source
	return false, nil
}

// useRequests has the drain go through eviction requests where the API
// server serves them.
func (r *drainRun) useRequests(cfg *rest.Config) error {
	if !responder.ServedBy(r.cs.Discovery()) {
		return nil
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	r.requests = newRequests(dyn)
	r.screen.Logf("runnerguard: the API server serves eviction requests: each runner pod is asked for once, as %s, and its responders say when it goes", drain.Requester)
	return nil
}

// setDeadline reads when the jobs still running are ended, and the reason
// each one's override gives, which names who runs the drain.
func (r *drainRun) setDeadline(ctx context.Context) error {
	user, err := whoAmI(ctx, r.cs)
	if err != nil {
		return err
	}
	r.deadline, _ = drain.ParseDeadline(r.o.deadline, time.Now())
	if r.reason, err = drain.Reason(r.o.reason, user, r.names); err != nil {
		return usageErrorf("%v", err)
	}
	return nil
}
