package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Fleet is what runnerguard must know of one CI system that runs its jobs
// in pods: how its pods are told from others, how its own signal says a
// runner is idle, who ends its jobs, when a job began and where a death is
// told. Each fleet answers it in a package of its own under internal/fleet,
// from the system's own source; internal/presets lists them. The guard,
// the injector, the leader, the reports and the CLI ask a Fleet and never
// branch on which fleet a pod belongs to.
type Fleet interface {
	// Name is the preset's name, as operators write it.
	Name() runnerpod.PresetName
	// Defaults is the preset as a plain install has it (Name and Enabled
	// aside): its runner containers, diagnostic env, cap and job keys.
	Defaults() runnerpod.Preset
	// Fits reports whether the pod carries the fleet's own marks; a pod
	// is the fleet's only with one of the preset's runner containers too.
	Fits(pod *corev1.Pod) bool
	// Idle is rule 6: the fleet's own signal that a running runner has no
	// job, or that its job is over (job: the fleet's record as read, see
	// RecordKeeper; JobNotRead for a fleet that keeps none), as of now.
	// "" when the signal says neither.
	Idle(pod *corev1.Pod, job runnerpod.JobSignal, now time.Time) (runnerpod.Rule, string)
	// JobStart is when the runner's job began, where the cluster tells it
	// apart from the runner's own start; nil otherwise.
	JobStart(pod *corev1.Pod) *metav1.Time
	// Sample gives pod, whose containers are the preset's runner
	// containers, the fleet's marks, so it is taken for one of the fleet's
	// (`runnerguard check`'s probe).
	Sample(pod *corev1.Pod)
	// Traits are the fleet's facts that need no pod.
	Traits() Traits
	// Zombie is the fleet's evidence that a running runner is alive but
	// will never run a job (rec: the fleet's record of the pod's job, as
	// RecordKeeper reads it and known to be the pod's; nil for a fleet that
	// keeps none): its kind, one of Traits().Zombies, and since when. It
	// takes no clock: a zombie is told by what the fleet's objects show,
	// never by a quiet spell, which a live job may have for hours.
	Zombie(pod *corev1.Pod, rec *unstructured.Unstructured) (runnerpod.Zombie, bool)
}

// Leased is a fleet whose idle signal may be a lease: the runner is busy
// until a time its fleet keeps moving forward while the job runs, and
// idle once the fleet stops (a pool that lost track of its runner, a hung
// runner). IdleFrom is when the pod's lease lapses; false for none.
type Leased interface {
	Fleet
	IdleFrom(pod *corev1.Pod) (time.Time, bool)
}

// Quiet answers for a fleet what it does not say: no idle signal of its
// own, no job start apart from the runner's, no marks a probe pod needs.
// A fleet embeds it and answers the rest.
type Quiet struct{}

// Idle: the fleet has no idle signal; a running runner is busy.
func (Quiet) Idle(*corev1.Pod, runnerpod.JobSignal, time.Time) (runnerpod.Rule, string) {
	return "", ""
}

// JobStart: not told apart from the runner's.
func (Quiet) JobStart(*corev1.Pod) *metav1.Time { return nil }

// Sample: the runner containers alone make a pod the fleet's.
func (Quiet) Sample(*corev1.Pod) {}

// Zombie: the fleet's objects show no runner that cannot run a job.
func (Quiet) Zombie(*corev1.Pod, *unstructured.Unstructured) (runnerpod.Zombie, bool) {
	return runnerpod.Zombie{}, false
}

// GitHubRunner is the preset of a fleet of GitHub Actions runners (ARC's
// scale sets, legacy ARC, most home-grown pools): the container "runner",
// its _diag log copied to stdout so the log pipeline keeps it after the
// pod is gone, and a cap of 168h: a job on a self-hosted runner runs for
// at most 5 days ("Usage limits for self-hosted runners",
// docs.github.com), and a runner may wait for its job first, which GitHub
// cancels after 24 h queued (up to 48 h).
func GitHubRunner() runnerpod.Preset {
	return runnerpod.Preset{RunnerContainers: []string{"runner"},
		DiagnosticEnv: []corev1.EnvVar{{Name: "ACTIONS_RUNNER_PRINT_LOG_TO_STDOUT", Value: "1"}},
		MaxProtected:  metav1.Duration{Duration: 168 * time.Hour}}
}

// Traits are what a fleet is, apart from any one pod.
type Traits struct {
	// MarkLabels and MarkAnnotations are the pod labels and annotations
	// Fits and Idle read: a copy of a pod that keeps these (the leader's
	// cache) is judged as the pod is.
	MarkLabels, MarkAnnotations []string
	// Owner says who ends the fleet's jobs by deleting their pods.
	Owner Owner
	// ToldOn is where a death is told to the job's developer, beside the
	// sinks every fleet has.
	ToldOn Destination
	// RecordKind is the kind of the fleet's own record of a runner's job
	// (RecordKeeper), "" for none: a job read from it has the source
	// RecordSource(RecordKind, the record's name).
	RecordKind string
	// RecordDeleted says, for a person refused a busy runner's deletion,
	// what the deletion of its record under way means for the pod.
	RecordDeleted string
	// GatedByInit: the runner starts only once a poller init container
	// got it a job, so a runner waiting while its pod's init containers
	// run is idle, not stuck.
	GatedByInit bool
	// ToldOnOwner: a death is told as an Event on the pod's controlling
	// owner too (Tekton's TaskRun, whose Events its CLI and dashboard
	// show), beside the pod's.
	ToldOnOwner bool
	// OneJob: the runner containers are the parts of one job (Tekton's
	// steps, run one after another; Buildkite's agent and the commands it
	// runs), so a part's end is no death of its own: the job's is the
	// first part, in the pod's order, that ended otherwise than cleanly,
	// or the last once all ended.
	OneJob bool
	// OwnView is where the fleet's system keeps its own account of how a
	// job ended, which the record keeps beside its class; nil for none.
	OwnView *OwnView
	// Chart is what the chart states of the fleet; the chart's fleet table
	// is generated from it (internal/presets).
	Chart Chart
	// Zombies are the kinds of zombie Zombie names, each with what it
	// means, for the person who reads the guard's answer, the Event and
	// `why`.
	Zombies map[string]string
	// ZombieEndedByRecord: a zombie is ended by deleting the fleet's record
	// of it (RecordKeeper), whose controller then removes the runner and
	// its pod; a pod ended alone would be made again the same way (ARC
	// re-creates a vanished pod from its EphemeralRunner). Otherwise a
	// zombie is ended by its pod's eviction.
	ZombieEndedByRecord bool
}

// Owner says who ends a fleet's jobs by deleting the job's pod (rule 7).
type Owner struct {
	// EndsJob: the job's owner ends a job by deleting its pod, so a
	// DELETE by the pod's recorded creator (or an owner principal) is the
	// owner at work.
	EndsJob bool
	// RunnerPodLabel, when set, is the job pod's label that names the
	// runner pod that owns the job: a ServiceAccount of the pod's own
	// namespace is the owner only with a token bound to that runner pod
	// (ARC's workflow pods). Unset, such a ServiceAccount is the owner
	// only with a token bound to a pod that runs no job (the manager's)
	// or with the credential it created the pod with (GitLab).
	RunnerPodLabel string
	// InRunnerNamespace: the preset may take a ServiceAccount of the
	// runner namespace as the owner by its name alone
	// (ownerInRunnerNamespace), for a manager that runs there.
	InRunnerNamespace bool
}

// Destination is a CI service a death can be told on.
type Destination string

// The destinations runnerguard can write to.
const (
	// ToldNowhere: the record, Events and the sinks only.
	ToldNowhere Destination = ""
	// GitHubCheckRun: a check run on the workflow run's commit.
	GitHubCheckRun Destination = "github"
	// GitLabCommitStatus: a commit status on the job's commit.
	GitLabCommitStatus Destination = "gitlab"
	// BuildkiteAnnotation: an annotation on the job's Buildkite build.
	BuildkiteAnnotation Destination = "buildkite"
	// ForgeCommit: the job's commit on the forge its record names
	// (v1alpha1.Job.Forge): a GitHub check run or a GitLab commit status.
	ForgeCommit Destination = "forge"
)

// RecordSource is the source (v1alpha1.Job.Source) of a job read from the
// fleet's record of that kind and name.
func RecordSource(kind, name string) string { return kind + "/" + name }

// RecordKeeper is a fleet that keeps its own record of each runner's job
// on the cluster (ARC's EphemeralRunner), which decides whether a running
// runner is busy: the guard reads it (ReadRecord), the leader follows
// every record of the kind (its marks and budgets, its records' jobs), and
// the guard notes who deleted one. Traits().RecordKind names its kind.
type RecordKeeper interface {
	Fleet
	// RecordResource is the record's API resource.
	RecordResource() schema.GroupVersionResource
	// RecordRef is the reference to the record that controls the pod, a
	// zero reference when none does.
	RecordRef(pod *corev1.Pod) metav1.OwnerReference
	// RecordPod is the runner pod a record stands for; the pod's RecordRef
	// must still name the record by UID.
	RecordPod(rec metav1.Object) types.NamespacedName
	// JudgeRecord is the job signal of rec, which a pod's RecordRef names
	// with the UID owner, and whether rec is being deleted. A nil record,
	// or one of another UID, says JobUnreadable: busy.
	JudgeRecord(rec *unstructured.Unstructured, owner types.UID) (runnerpod.JobSignal, bool)
	// RecordJob is the job rec names, nil when it names none.
	RecordJob(rec *unstructured.Unstructured) *v1alpha1.Job
	// RecordFields are the status fields JudgeRecord and RecordJob read:
	// a copy of a record that keeps only these, its identity, deletion and
	// finalizers (the leader's cache) is judged as the record is.
	RecordFields() []string
}

// Record is what a fleet's record of a runner says.
type Record struct {
	Signal runnerpod.JobSignal
	// Deleting: the record is being deleted (the fleet is removing the
	// runner).
	Deleting bool
	// Job is the job the record names, nil when it names none.
	Job *v1alpha1.Job
}

// ErrNotOwner: the record of the pod's owner's name has another UID (an
// idle runner of the same name recreated, or a reference re-pointed at
// one): it says nothing of the pod's job.
var ErrNotOwner = errors.New("the fleet's record of that name is not the pod's owner")

// ReadRecord reads the record that controls the pod, through r (uncached,
// by name: a stale record would misjudge), and judges it. A pod no record
// controls says JobNotRead; one whose record cannot be read, or is not the
// pod's owner by UID, says JobUnreadable (taken to be busy) with the
// error, which the caller logs in its words.
func ReadRecord(ctx context.Context, r client.Reader, k RecordKeeper, pod *corev1.Pod) (Record, error) {
	ref := k.RecordRef(pod)
	if ref.Name == "" {
		return Record{Signal: runnerpod.JobNotRead}, nil
	}
	rec := &unstructured.Unstructured{}
	rec.SetGroupVersionKind(k.RecordResource().GroupVersion().WithKind(k.Traits().RecordKind))
	if err := r.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: ref.Name}, rec); err != nil {
		return Record{Signal: runnerpod.JobUnreadable}, err
	}
	if err := notPods(k, rec, pod, ref); err != nil {
		return Record{Signal: runnerpod.JobUnreadable}, err
	}
	signal, deleting := k.JudgeRecord(rec, ref.UID)
	return Record{Signal: signal, Deleting: deleting, Job: k.RecordJob(rec)}, nil
}

// Judge is k's judgement of rec (nil: not read) as the record of pod, as
// ReadRecord makes it: a record that is not the one pod's reference names
// by UID, or that stands for another pod, says JobUnreadable (busy). A
// reference re-pointed at another runner's live, idle record must not
// make a busy runner idle.
func Judge(k RecordKeeper, rec *unstructured.Unstructured, pod *corev1.Pod) runnerpod.JobSignal {
	ref := k.RecordRef(pod)
	if rec == nil || notPods(k, rec, pod, ref) != nil {
		return runnerpod.JobUnreadable
	}
	signal, _ := k.JudgeRecord(rec, ref.UID)
	return signal
}

// ZombieOf is f's word on whether pod is a zombie (Fleet.Zombie), rec being
// the fleet's record of it for a RecordKeeper: a record that is not the
// pod's (as Judge tells it) or none says nothing, so no zombie.
func ZombieOf(f Fleet, rec *unstructured.Unstructured, pod *corev1.Pod) (runnerpod.Zombie, bool) {
	if k, ok := f.(RecordKeeper); ok {
		if rec == nil || notPods(k, rec, pod, k.RecordRef(pod)) != nil {
			return runnerpod.Zombie{}, false
		}
	} else {
		rec = nil
	}
	return f.Zombie(pod, rec)
}

// notPods says why rec is not the record of pod, which names it by ref:
// another UID (a runner of that name recreated), or another pod's record
// (a reference re-pointed at another runner's); nil when it is.
func notPods(k RecordKeeper, rec *unstructured.Unstructured, pod *corev1.Pod, ref metav1.OwnerReference) error {
	if rec.GetUID() != ref.UID {
		return fmt.Errorf("%w: owner UID %s, found UID %s", ErrNotOwner, ref.UID, rec.GetUID())
	}
	if p := k.RecordPod(rec); p.Name != pod.Name {
		return fmt.Errorf("%w: the record stands for pod %s, not %s", ErrNotOwner, p.Name, pod.Name)
	}
	return nil
}
