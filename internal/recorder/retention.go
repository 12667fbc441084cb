package recorder

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// NoteMaxAge is how long the guard's deletion notes are kept: the watcher
// needs one only for the seconds between a delete and the runner's end.
const NoteMaxAge = time.Hour

// Expired lists the records that retention removes: those past their age
// (clean exits and jobs' normal ends sooner), then, of each namespace
// beyond MaxPerNamespace, the oldest normal records (clean exits and jobs'
// normal ends) and only once none is left the oldest abnormal ones. items
// are RunnerDeaths as metadata.
//
// Normal records go first because they are the cheap ones to make: any
// principal that may create pods a preset matches (a job's own
// ServiceAccount among them) can end short-lived ones cleanly, as fast as
// it likes, and with one count for both kinds their records would push the
// namespace's older OOM kills and evictions out of the count.
//
// The count spares the records of deaths that pods still show in their
// status (shown names them, asked only of namespaces over the count), and
// never removes an abnormal record while a normal one is kept, even one
// spared so (overCount): the
// watcher reads deaths from pod status, and a leader that has not seen such
// a record written (a new one, or one that forgot) would write it again, a
// second record of one death. A pod shows its runner's current and last
// termination only, so a crash-looping pod's older records still go. Age
// needs no such care: a death older than its retention is never written
// (death.Observation's KeepSince, CleanSince).
func Expired(items []metav1.PartialObjectMetadata, policy config.Records, now time.Time, shown func(namespace string) (map[string]bool, error)) ([]metav1.PartialObjectMetadata, error) {
	var out []metav1.PartialObjectMetadata
	kept := map[string][]metav1.PartialObjectMetadata{}
	for _, it := range items {
		maxAge := policy.MaxAge.Duration
		if !death.Class(it.Labels[death.ClassLabel]).Abnormal() {
			maxAge = policy.CleanMaxAge.Duration
		}
		if now.Sub(it.CreationTimestamp.Time) > maxAge {
			out = append(out, it)
			continue
		}
		kept[it.Namespace] = append(kept[it.Namespace], it)
	}
	if policy.MaxPerNamespace == 0 {
		return out, nil
	}
	for _, ns := range slices.Sorted(maps.Keys(kept)) {
		items := kept[ns]
		over := len(items) - policy.MaxPerNamespace
		if over <= 0 {
			continue
		}
		spare, err := shown(ns)
		if err != nil {
			return nil, err
		}
		slices.SortFunc(items, func(a, b metav1.PartialObjectMetadata) int {
			return cmp.Or(cmp.Compare(abnormalRank(a), abnormalRank(b)),
				a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
		})
		out = append(out, overCount(items, over, spare)...)
	}
	return out, nil
}

// overCount picks, of a namespace's records sorted normal first and oldest
// first, the over records the count removes: those of deaths no pod shows
// (spare), normal ones first, and an abnormal one only once no normal
// record is left, spared or not. A job that leaves its short-lived pods in
// place spares their normal records; were the count to fall past them, it
// would remove the abnormal records of pods that are gone, the ones that
// cannot be written again. The namespace stays over the count instead,
// until those pods go and their records with them.
func overCount(items []metav1.PartialObjectMetadata, over int, spare map[string]bool) []metav1.PartialObjectMetadata {
	var out []metav1.PartialObjectMetadata
	normalKept := false
	for _, it := range items {
		if over == 0 {
			break
		}
		normal := abnormalRank(it) == 0
		switch {
		case spare[it.Name]:
			normalKept = normalKept || normal
		case !normal && normalKept:
			return out
		default:
			out = append(out, it)
			over--
		}
	}
	return out
}

// abnormalRank orders a namespace's records for the count: normal ones (0)
// before abnormal ones (1). A record without a class label, which only
// someone other than the watcher can have written, ranks as abnormal, as
// its age does.
func abnormalRank(it metav1.PartialObjectMetadata) int {
	c, ok := it.Labels[death.ClassLabel]
	if ok && !death.Class(c).Abnormal() {
		return 0
	}
	return 1
}

// Collector removes expired RunnerDeaths and old deletion notes, on the
// leader only. It lists metadata only, page by page, uncached: the records
// of a whole cluster are never held in memory.
type Collector struct {
	// Reader lists uncached; Client deletes.
	Reader client.Reader
	Client client.Client
	// Pods is the watcher's cache of runner pods, whose shown deaths'
	// records the count spares; Presets tell its runners.
	Pods    *PodCache
	Presets []runnerpod.Preset
	// Gap, when set, names the runner pods removed lately, whose records
	// the count spares too: a replica that comes to lead plans those
	// removals again, and would write a removed record a second time.
	Gap    *Gap
	Policy config.Records
	Now    func() time.Time
}

// NeedLeaderElection: only the leader collects.
func (c *Collector) NeedLeaderElection() bool { return true }

// Start collects now and then every Policy.CollectInterval until ctx ends.
func (c *Collector) Start(ctx context.Context) error {
	// The count spares the pods the cache holds: not before it holds them.
	if !toolscache.WaitForCacheSync(ctx.Done(), c.Pods.HasSynced) {
		return nil
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.Collect(ctx); err != nil {
			logf.FromContext(ctx).Error(err, "collecting expired death records")
		}
	}, c.Policy.CollectInterval.Duration)
	return nil
}

// Collect removes what has expired now.
func (c *Collector) Collect(ctx context.Context) error {
	now := c.Now()
	deaths, err := c.list(ctx, "RunnerDeathList")
	if err != nil {
		return err
	}
	// The records of the pods removed lately, by namespace.
	lately := map[string][]string{}
	if c.Gap != nil {
		removed := c.Gap.Recent()
		for _, d := range deaths {
			if removed[types.UID(d.Labels[death.PodUIDLabel])] {
				lately[d.Namespace] = append(lately[d.Namespace], d.Name)
			}
		}
	}
	expired, err := Expired(deaths, c.Policy, now, func(ns string) (map[string]bool, error) {
		spare, err := c.Pods.Shown(ns, c.Presets)
		if err != nil {
			return nil, err
		}
		for _, name := range lately[ns] {
			spare[name] = true
		}
		return spare, nil
	})
	if err != nil {
		return err
	}
	if err := c.remove(ctx, "RunnerDeath", expired); err != nil {
		return err
	}
	notes, err := c.list(ctx, "RunnerDeletionList")
	if err != nil {
		return err
	}
	var old []metav1.PartialObjectMetadata
	for _, n := range notes {
		if now.Sub(n.CreationTimestamp.Time) > NoteMaxAge {
			old = append(old, n)
		}
	}
	return c.remove(ctx, "RunnerDeletion", old)
}

func (c *Collector) list(ctx context.Context, kind string) ([]metav1.PartialObjectMetadata, error) {
	var out []metav1.PartialObjectMetadata
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(kind))
	for {
		if err := c.Reader.List(ctx, list, client.Limit(500), client.Continue(list.Continue)); err != nil {
			return nil, err
		}
		out = append(out, list.Items...)
		if list.Continue == "" {
			return out, nil
		}
	}
}

func (c *Collector) remove(ctx context.Context, kind string, items []metav1.PartialObjectMetadata) error {
	for i := range items {
		it := &items[i]
		it.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(kind))
		// The UID precondition: a record of the same name written since is
		// not removed by mistake.
		if err := c.Client.Delete(ctx, it, client.Preconditions{UID: &it.UID}); client.IgnoreNotFound(err) != nil {
			return err
		}
		recordsCollected.WithLabelValues(kind).Inc()
	}
	if len(items) > 0 {
		logf.FromContext(ctx).Info("retention removed old objects", "kind", kind, "count", len(items))
	}
	return nil
}
