package death

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/deletion"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/refusal"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// end is when podtest's terminated runners end.
var end = podtest.Start.Add(10 * time.Minute)

const (
	v2Final   = `{"v":1,"ts":"2026-11-01T12:10:00Z","cg":"v2","oom":0,"oom_kill":0}`
	v2OOMKill = `{"v":1,"ts":"2026-11-01T12:10:00Z","cg":"v2","oom":1,"oom_kill":1}`
	// v2KillAtEnd: the vitals saw the kill as the runner ended, and left
	// their reading half a minute later.
	v2KillAtEnd = `{"v":1,"ts":"2026-11-01T12:10:33Z","cg":"v2","oom":2,"oom_kill":2,"oom_kill_at":"2026-11-01T12:10:00Z"}`
)

// killEndedIt is the basis of a container killed at its limit as the
// vitals saw the kill.
const killEndedIt = "the runtime reported OOMKilled, and the container ended 0s after the first OOM kill the vitals saw (at 2026-11-01T12:10:00Z), too soon to have outlived it: the kill ended the container, and the job with it"

func note(requester, rule string, at time.Time) *v1alpha1.DeletionNote {
	return &v1alpha1.DeletionNote{Pod: "r", UID: "uid-r", Requester: requester, Rule: rule, Operation: "delete", Time: metav1.NewTime(at)}
}

// overriddenFor is w as the guard admits a delete under note: an
// override's note stands only for a pod that carries the override.
func overriddenFor(w *podtest.Wrapper, note *v1alpha1.DeletionNote) *podtest.Wrapper {
	if note != nil && note.Rule == string(runnerpod.RuleOverride) {
		w.Annotate(runnerpod.AllowDelete, "drain")
	}
	return w
}

func TestDecide(t *testing.T) {
	type want struct {
		classes   []Class
		deleted   bool
		deletedBy string
		startedBy string
		job       string
		basis     string
		retry     time.Duration
		vitals    bool // the sidecar's final reading on the record
	}
	cases := []struct {
		name   string
		pod    *podtest.Wrapper
		goneAt time.Time
		note   *v1alpha1.DeletionNote
		now    time.Time
		clean  bool // KeepClean false when unset
		// What the reads handed to Decide find: the node's state, the job
		// as the fleet states it now, and whether the death is on record.
		node     *corev1.Node
		job      *v1alpha1.Job
		recorded bool
		want     want
	}{
		{name: "a death with its vitals is recorded at once",
			pod: podtest.Runner("ci", "r").Terminated("runner", 1, "Error").SidecarTerminated(runnerpod.VitalsContainer, v2Final),
			now: end.Add(time.Second), want: want{classes: []Class{ErrorExit}}},
		{name: "vitals still to come: wait for the sidecar's final reading",
			pod: podtest.Runner("ci", "r").Terminated("runner", 1, "Error").SidecarRunning(runnerpod.VitalsContainer),
			now: end.Add(time.Second), want: want{retry: VitalsWait - time.Second}},
		{name: "vitals late past the wait: recorded without them",
			pod: podtest.Runner("ci", "r").Terminated("runner", 1, "Error").SidecarRunning(runnerpod.VitalsContainer),
			now: end.Add(VitalsWait), want: want{classes: []Class{ErrorExit}}},
		{name: "a clean exit is not recorded when clean records are off",
			pod: podtest.Runner("ci", "r").Terminated("runner", 0, "Completed"), now: end.Add(time.Second)},
		{name: "a clean exit is recorded when kept",
			pod: podtest.Runner("ci", "r").Terminated("runner", 0, "Completed"), now: end.Add(time.Second), clean: true,
			want: want{classes: []Class{CleanExit}}},
		{name: "a clean exit past its shorter retention is not recorded again, though its pod lingers",
			pod: podtest.Runner("ci", "r").Terminated("runner", 0, "Completed"), now: end.Add(25 * time.Hour), clean: true},
		{name: "an abnormal death as old is still recorded",
			pod: podtest.Runner("ci", "r").Terminated("runner", 1, "Error"), now: end.Add(25 * time.Hour), clean: true,
			want: want{classes: []Class{ErrorExit}}},
		{name: "a death the kubelet could not date is dated by its start for retention",
			pod: func() *podtest.Wrapper {
				w := podtest.Runner("ci", "r").Terminated("runner", 137, "ContainerStatusUnknown")
				w.Status.ContainerStatuses[0].State.Terminated.FinishedAt = metav1.Time{}
				return w
			}(), now: end.Add(31 * 24 * time.Hour)},
		{name: "a death past retention is not recorded again",
			pod: podtest.Runner("ci", "r").Terminated("runner", 1, "Error"), now: end.Add(31 * 24 * time.Hour)},
		{name: "a deletion's death names the deleter the guard noted",
			pod:  podtest.Runner("ci", "r").Terminated("runner", 143, "Error").Deleted(end.Add(-time.Second), 30),
			note: note("reaper", "override", end.Add(-time.Second)), now: end.Add(time.Second),
			want: want{classes: []Class{SigTerm}, deleted: true, deletedBy: "reaper"}},
		{name: "a probed runner's kill after the noted deletion is the deletion's, though a later delete moved the pod's deletionTimestamp",
			pod: func() *podtest.Wrapper {
				w := podtest.Runner("ci", "r").Terminated("runner", 137, "Error").Deleted(end.Add(time.Minute), 0)
				w.Spec.Containers[0].LivenessProbe = &corev1.Probe{}
				return w
			}(),
			note: note("reaper", "override", end.Add(-20*time.Second)), now: end.Add(2 * time.Minute),
			want: want{classes: []Class{SigKill}, deleted: true, deletedBy: "reaper"}},
		{name: "deleter noted late: wait for the note",
			pod: podtest.Runner("ci", "r").Terminated("runner", 143, "Error").Deleted(end.Add(-time.Second), 30),
			now: end.Add(time.Second), want: want{retry: deletion.NoteWait - 2*time.Second}},
		{name: "no note after the wait: an unreviewed deletion",
			pod: podtest.Runner("ci", "r").Terminated("runner", 143, "Error").Deleted(end.Add(-time.Second), 30),
			now: end.Add(deletion.NoteWait), want: want{classes: []Class{SigTerm}, deleted: true}},
		{name: "a note of a deletion that did not follow names nobody",
			pod:  podtest.Runner("ci", "r").Terminated("runner", 143, "Error").Deleted(end.Add(-time.Second), 30),
			note: note("forger", "override", end.Add(-time.Hour)), now: end.Add(deletion.NoteWait),
			want: want{classes: []Class{SigTerm}, deleted: true}},
		{name: "a note of another pod's UID names nobody",
			pod:  podtest.Runner("ci", "r").Terminated("runner", 143, "Error").Deleted(end.Add(-time.Second), 30),
			note: &v1alpha1.DeletionNote{UID: "uid-other", Requester: "x", Time: metav1.NewTime(end)}, now: end.Add(deletion.NoteWait),
			want: want{classes: []Class{SigTerm}, deleted: true}},
		{name: "grace 0: a pod removed while its runner ran is deleted-running",
			pod: podtest.Runner("ci", "r").Running("runner"), goneAt: end, note: note("admin", "override", end),
			now: end.Add(time.Second), want: want{classes: []Class{DeletedRunning}, deleted: true, deletedBy: "admin"}},
		{name: "pod gone while its runner ran, no note yet: wait",
			pod: podtest.Runner("ci", "r").Running("runner"), goneAt: end, now: end.Add(time.Second),
			want: want{retry: deletion.NoteWait - time.Second}},
		{name: "force-deleted a minute before a lagging watcher saw it gone: the note still has its wait",
			pod: podtest.Runner("ci", "r").Running("runner").Deleted(end.Add(-time.Minute), 0), goneAt: end, now: end.Add(time.Second),
			want: want{retry: deletion.NoteWait - time.Second}},
		{name: "pod gone while its runner ran, unreviewed (pod GC)",
			pod: podtest.Runner("ci", "r").Running("runner"), goneAt: end, now: end.Add(deletion.NoteWait),
			want: want{classes: []Class{DeletedRunning}, deleted: true}},
		{name: "a gone pod does not wait for vitals that will never come",
			pod:    podtest.Runner("ci", "r").Terminated("runner", 1, "Error").SidecarRunning(runnerpod.VitalsContainer),
			goneAt: end.Add(time.Second), now: end.Add(time.Second + deletion.NoteWait), want: want{classes: []Class{ErrorExit}}},
		{name: "a runner that ended before its pod's deletion is not blamed on it",
			pod:  podtest.Runner("ci", "r").Terminated("runner", 1, "Error").Deleted(end.Add(time.Minute), 30),
			note: note("reaper", "override", end.Add(time.Minute)), now: end.Add(2 * time.Minute),
			want: want{classes: []Class{ErrorExit}, deletedBy: "reaper"}},
		{name: "GitLab: the owner's delete ending its job is the job's normal end",
			pod:  podtest.GitLab("ci", "r").Annotate(runnerpod.CreatedBy, "system:serviceaccount:glr:gitlab-runner").Terminated("build", 137, "Error").Deleted(end.Add(-30*time.Second), 30).SidecarTerminated(runnerpod.VitalsContainer, v2Final),
			note: note("system:serviceaccount:glr:gitlab-runner", "job-owner", end.Add(-30*time.Second)), now: end.Add(time.Second), clean: true,
			want: want{classes: []Class{JobEnded}, deleted: true, deletedBy: "system:serviceaccount:glr:gitlab-runner", basis: OutcomeUnknown}},
		{name: "GitLab: seen only after the kubelet's final delete moved the deletionTimestamp, the owner's note still makes it the job's end",
			pod:  podtest.GitLab("ci", "r").Annotate(runnerpod.CreatedBy, "glr").Terminated("build", 137, "Error").Deleted(end.Add(time.Second), 0).SidecarTerminated(runnerpod.VitalsContainer, v2Final),
			note: note("glr", "job-owner", end.Add(-30*time.Second)), now: end.Add(time.Minute), clean: true,
			want: want{classes: []Class{JobEnded}, deleted: true, deletedBy: "glr"}},
		{name: "GitLab: a final delete that came minutes after the grace period still leaves the owner's note counting",
			pod:  podtest.GitLab("ci", "r").Annotate(runnerpod.CreatedBy, "glr").Terminated("build", 137, "Error").Deleted(end.Add(2*time.Minute), 0),
			note: note("glr", "job-owner", end.Add(-30*time.Second)), now: end.Add(3 * time.Minute), clean: true,
			want: want{classes: []Class{JobEnded}, deleted: true, deletedBy: "glr"}},
		{name: "GitLab: seen only after a lagging kubelet's final delete, a second after the runner ended: wait for the owner's note",
			pod: podtest.GitLab("ci", "r").Terminated("build", 143, "Error").Deleted(end.Add(time.Second), 0),
			now: end.Add(2 * time.Second), want: want{retry: deletion.NoteWait - time.Second}},
		{name: "GitLab: the owner's note of that deletion, come during the wait, makes it the job's end",
			pod:  podtest.GitLab("ci", "r").Annotate(runnerpod.CreatedBy, "glr").Terminated("build", 143, "Error").Deleted(end.Add(time.Second), 0),
			note: note("glr", "job-owner", end.Add(-200*time.Millisecond)), now: end.Add(3 * time.Second), clean: true,
			want: want{classes: []Class{JobEnded}, deleted: true, deletedBy: "glr"}},
		{name: "no note after that wait: the runner's own end, not blamed on the deletion",
			pod: podtest.GitLab("ci", "r").Terminated("build", 143, "Error").Deleted(end.Add(time.Second), 0),
			now: end.Add(deletion.NoteWait + time.Second), want: want{classes: []Class{SigTerm}}},
		{name: "a note from longer than a grace period and the kubelet's lag before the deletion seen names nobody",
			pod:  podtest.GitLab("ci", "r").Annotate(runnerpod.CreatedBy, "forger").Terminated("build", 137, "Error").Deleted(end.Add(time.Second), 0),
			note: note("forger", "job-owner", end.Add(-10*time.Minute)), now: end.Add(time.Minute), clean: true,
			want: want{classes: []Class{SigKill}}},
		{name: "GitLab: job-ended is not recorded when clean records are off",
			pod:  podtest.GitLab("ci", "r").Annotate(runnerpod.CreatedBy, "glr").Terminated("build", 137, "Error").Deleted(end.Add(-30*time.Second), 30),
			note: note("glr", "job-owner", end.Add(-30*time.Second)), now: end.Add(deletion.NoteWait)},
		{name: "GitLab: the owner's delete after a step was OOM-killed keeps the OOM evidence",
			pod:  podtest.GitLab("ci", "r").Annotate(runnerpod.CreatedBy, "glr").Terminated("build", 137, "Error").Deleted(end.Add(-30*time.Second), 30).SidecarTerminated(runnerpod.VitalsContainer, v2OOMKill),
			note: note("glr", "job-owner", end.Add(-30*time.Second)), now: end.Add(time.Second),
			want: want{classes: []Class{CgroupOOM}, deleted: true, deletedBy: "glr", vitals: true,
				basis: "the vitals counted 1 OOM kill(s), which outweigh the exit code; the vitals dated no kill, so a kill of one process that the container outlived cannot be told from the container's own"}},
		{name: "ARC workflow pod removed at once by the runner: the job's normal end",
			pod: podtest.ARCWorkflow("ci", "r").Annotate(runnerpod.CreatedBy, "arc-runner").Running("job"), goneAt: end, now: end, clean: true,
			note: &v1alpha1.DeletionNote{UID: "uid-r-workflow", Requester: "arc-runner", Rule: "job-owner", Time: metav1.NewTime(end)},
			want: want{classes: []Class{JobEnded}, deleted: true, deletedBy: "arc-runner"}},
		{name: "a generic runner's delete under job-owner stays a death (its preset's owner does not end jobs)",
			pod:  podtest.Runner("ci", "r").Annotate(runnerpod.CreatedBy, "x").Terminated("runner", 143, "Error").Deleted(end.Add(-time.Second), 30),
			note: note("x", "job-owner", end.Add(-time.Second)), now: end.Add(time.Second),
			want: want{classes: []Class{SigTerm}, deleted: true, deletedBy: "x"}},
		{name: "ARC: its delete of a runner still shutting down after the job was over is the job's normal end, started by whoever deleted the EphemeralRunner",
			pod: podtest.ARCScaleSet("ci", "r").Terminated("runner", 143, "Error").Deleted(end.Add(-5*time.Second), 30),
			note: func() *v1alpha1.DeletionNote {
				n := note("arc", "job-over", end.Add(-5*time.Second))
				n.StartedBy = "reaper"
				return n
			}(), now: end.Add(time.Second), clean: true,
			want: want{classes: []Class{JobEnded}, deleted: true, deletedBy: "arc", startedBy: "reaper"}},
		{name: "ARC: the job the guard's note kept names the record",
			pod: podtest.ARCScaleSet("ci", "r").Terminated("runner", 143, "Error").Deleted(end.Add(-5*time.Second), 30),
			note: func() *v1alpha1.DeletionNote {
				n := note("arc", "job-over", end.Add(-5*time.Second))
				n.Job = &v1alpha1.Job{ID: "9001", Source: "EphemeralRunner/r"}
				return n
			}(), now: end.Add(time.Second), clean: true,
			want: want{classes: []Class{JobEnded}, deleted: true, deletedBy: "arc", job: "9001"}},
		{name: "ARC: an idle runner its fleet removed on scale-down (never a job) is an idle removal, neither a death nor a job end",
			pod: podtest.ARCScaleSet("ci", "r").Terminated("runner", 143, "Error").Deleted(end.Add(-5*time.Second), 30),
			note: func() *v1alpha1.DeletionNote {
				n := note("arc", "idle", end.Add(-5*time.Second))
				n.StartedBy = "arc-listener"
				return n
			}(), now: end.Add(time.Second), clean: true,
			want: want{classes: []Class{IdleRemoved}, deleted: true, deletedBy: "arc", startedBy: "arc-listener"}},
		{name: "ARC: a zombie its fleet's controller deleted is a zombie's end, naming its kind",
			pod:  podtest.ARCScaleSet("ci", "r").Annotate(runnerpod.ZombieAnnotation, "spent-config 2026-11-01T11:00:00Z").Terminated("runner", 143, "Error").Deleted(end.Add(-5*time.Second), 30),
			note: note("arc", "zombie", end.Add(-5*time.Second)), now: end.Add(time.Second),
			want: want{classes: []Class{ZombieEnded}, deleted: true, deletedBy: "arc",
				basis: "the leader named the runner a zombie (spent-config) at 2026-11-01T11:00:00Z: alive, but its fleet's objects showed it would never run a job"}},
		{name: "ARC: a zombie whose EphemeralRunner was deleted, then its pod by ARC, is a zombie's end too",
			pod:  podtest.ARCScaleSet("ci", "r").Annotate(runnerpod.ZombieAnnotation, "spent-config 2026-11-01T11:00:00Z").Terminated("runner", 143, "Error").Deleted(end.Add(-5*time.Second), 30),
			note: note("arc", "job-over", end.Add(-5*time.Second)), now: end.Add(time.Second),
			want: want{classes: []Class{ZombieEnded}, deleted: true, deletedBy: "arc"}},
		{name: "a zombie note for a pod the leader never named one is not believed: the deletion's own class",
			pod:  podtest.ARCScaleSet("ci", "r").Terminated("runner", 143, "Error").Deleted(end.Add(-5*time.Second), 30),
			note: note("reaper", "zombie", end.Add(-5*time.Second)), now: end.Add(time.Second),
			want: want{classes: []Class{SigTerm}, deleted: true}},
		{name: "ARC: an idle removal is not recorded when clean records are off",
			pod:  podtest.ARCScaleSet("ci", "r").Terminated("runner", 143, "Error").Deleted(end.Add(-5*time.Second), 30),
			note: note("arc", "idle", end.Add(-5*time.Second)), now: end.Add(time.Second)},
		{name: "ARC: an idle runner OOM-killed before its removal stays an OOM",
			pod:  podtest.ARCScaleSet("ci", "r").Terminated("runner", 137, "OOMKilled").Deleted(end.Add(-5*time.Second), 30),
			note: note("arc", "idle", end.Add(-5*time.Second)), now: end.Add(time.Second),
			want: want{classes: []Class{CgroupOOM}, deleted: true, deletedBy: "arc"}},
		{name: "an idle runner that ended before its removal began keeps its own class",
			pod:  podtest.ARCScaleSet("ci", "r").Terminated("runner", 1, "Error").Deleted(end.Add(time.Minute), 30),
			note: note("arc", "idle", end.Add(time.Minute)), now: end.Add(2 * time.Minute),
			want: want{classes: []Class{ErrorExit}, deletedBy: "arc"}},
		{name: "ARC: an OOM before the job was over stays an OOM",
			pod:  podtest.ARCScaleSet("ci", "r").Terminated("runner", 137, "OOMKilled").Deleted(end.Add(-5*time.Second), 30),
			note: note("arc", "job-over", end.Add(-5*time.Second)), now: end.Add(time.Second),
			want: want{classes: []Class{CgroupOOM}, deleted: true, deletedBy: "arc",
				basis: "the runtime reported OOMKilled; the vitals dated no kill, so a kill of one process that the container outlived cannot be told from the container's own"}},
		{name: "GitLab: the manager's delete a second before the pod's deadline is the job's timeout, not its normal end",
			pod:  podtest.GitLab("ci", "r").Annotate(runnerpod.CreatedBy, "glr").ActiveDeadline(599, podtest.Start).Terminated("build", 137, "Error").Deleted(end.Add(-time.Second), 0),
			note: note("glr", "job-owner", end.Add(-time.Second)), now: end.Add(time.Second), clean: true,
			want: want{classes: []Class{JobTimeout}, deleted: true, deletedBy: "glr",
				basis: "the job's owner deleted the pod at 2026-11-01T12:09:59Z, 0s before its deadline (activeDeadlineSeconds 599 from its start): the job's timeout, which the owner enforces by the delete"}},
		{name: "GitLab: the manager's delete well before the pod's deadline is the job's normal end",
			pod:  podtest.GitLab("ci", "r").Annotate(runnerpod.CreatedBy, "glr").ActiveDeadline(3600, podtest.Start).Terminated("build", 137, "Error").Deleted(end.Add(-time.Second), 0),
			note: note("glr", "job-owner", end.Add(-time.Second)), now: end.Add(time.Second), clean: true,
			want: want{classes: []Class{JobEnded}, deleted: true, deletedBy: "glr"}},
		{name: "GitLab: a step OOM-killed minutes before the owner's delete is a process's OOM, the container lived on",
			pod: podtest.GitLab("ci", "r").Annotate(runnerpod.CreatedBy, "glr").Terminated("build", 137, "Error").Deleted(end.Add(-30*time.Second), 30).
				SidecarTerminated(runnerpod.VitalsContainer, `{"v":1,"ts":"2026-11-01T12:10:00Z","cg":"v2","oom":1,"oom_kill":1,"oom_kill_at":"2026-11-01T12:07:00Z"}`),
			note: note("glr", "job-owner", end.Add(-30*time.Second)), now: end.Add(time.Second),
			want: want{classes: []Class{ProcessOOM}, deleted: true, deletedBy: "glr"}},
		{name: "a container killed at its limit within a second of the vitals' kill stays a cgroup OOM",
			pod: podtest.Runner("ci", "r").Terminated("runner", 137, "OOMKilled").
				SidecarTerminated(runnerpod.VitalsContainer, `{"v":1,"ts":"2026-11-01T12:10:00Z","cg":"v2","oom":1,"oom_kill":1,"oom_kill_at":"2026-11-01T12:09:59Z"}`),
			now: end.Add(time.Second), want: want{classes: []Class{CgroupOOM}}},
		{name: "GitLab: a build container OOM-killed on its own keeps its sidecar running beside the helper until the manager's delete ends them: the vitals are waited for until that deletion's grace ends",
			pod: podtest.GitLab("ci", "r").Terminated("build", 137, "OOMKilled").Deleted(end.Add(3*time.Second), 30).SidecarRunning(runnerpod.VitalsContainer),
			now: end.Add(VitalsWait), want: want{retry: 33 * time.Second}},
		{name: "GitLab: the sidecar's reading, left at the end of that deletion's grace, is on the record, and the delete after the kill is not blamed for it",
			pod: podtest.GitLab("ci", "r").Terminated("build", 137, "OOMKilled").Deleted(end.Add(3*time.Second), 30).SidecarTerminated(runnerpod.VitalsContainer, v2KillAtEnd),
			now: end.Add(34 * time.Second), want: want{classes: []Class{CgroupOOM}, vitals: true, basis: killEndedIt}},
		{name: "GitLab: the manager's delete in the second its build container was OOM-killed did not end it: the record keeps who asked, the kill ended the job",
			pod:  podtest.GitLab("ci", "r").Annotate(runnerpod.CreatedBy, "glr").Terminated("build", 137, "OOMKilled").Deleted(end, 30).SidecarTerminated(runnerpod.VitalsContainer, v2KillAtEnd),
			note: note("glr", "job-owner", end), now: end.Add(31 * time.Second),
			want: want{classes: []Class{CgroupOOM}, deletedBy: "glr", vitals: true, basis: killEndedIt}},
		{name: "activeDeadlineSeconds ran out: a job timeout",
			pod: podtest.GitLab("ci", "r").Terminated("build", 137, "Error").Reason("DeadlineExceeded"), now: end.Add(time.Second),
			want: want{classes: []Class{JobTimeout}}},
		{name: "a restart in place is two deaths",
			pod: podtest.Runner("ci", "r").Restarting("runner", 1, "Error").Terminated("runner", 137, "OOMKilled"), now: end.Add(time.Second),
			want: want{classes: []Class{ErrorExit, CgroupOOM}}},
		{name: "a runner deleted while Karpenter drains its node is recorded node-disrupted, with the node's state",
			pod:  podtest.Runner("ci", "r").Terminated("runner", 143, "Error").Deleted(end.Add(-time.Second), 30),
			note: note("karpenter", "node-drain", end.Add(-time.Second)), now: end.Add(time.Second),
			node: node(corev1.Taint{Key: TaintKarpenterDisrupted, Effect: corev1.TaintEffectNoSchedule}),
			want: want{classes: []Class{NodeDisrupted}, deleted: true, deletedBy: "karpenter",
				basis: "the pod was deleted while Karpenter was removing the node (taint karpenter.sh/disrupted)"}},
		{name: "a pod removed while its runner ran on an unreachable node, unreviewed, is recorded node-lost",
			pod: podtest.Runner("ci", "r").Running("runner"), goneAt: end, now: end.Add(deletion.NoteWait),
			node: node(corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}),
			want: want{classes: []Class{NodeLost}, deleted: true, basis: "the pod was removed with no end reported while the node was unreachable"}},
		{name: "a runner deleted on a healthy node stays a SIGTERM, with the node's state",
			pod:  podtest.Runner("ci", "r").Terminated("runner", 143, "Error").Deleted(end.Add(-time.Second), 30),
			note: note("reaper", "override", end.Add(-time.Second)), now: end.Add(time.Second), node: node(),
			want: want{classes: []Class{SigTerm}, deleted: true, deletedBy: "reaper"}},
		{name: "a job's normal end on a draining node stays the job's end, and its node is not read",
			pod:  podtest.GitLab("ci", "r").Annotate(runnerpod.CreatedBy, "glr").Terminated("build", 137, "Error").Deleted(end.Add(-30*time.Second), 30),
			note: note("glr", "job-owner", end.Add(-30*time.Second)), now: end.Add(time.Second), clean: true,
			node: node(corev1.Taint{Key: TaintKarpenterDisrupted}),
			want: want{classes: []Class{JobEnded}, deleted: true, deletedBy: "glr"}},
		{name: "the job as the fleet states it now names the record, over the guard's note's",
			pod: podtest.ARCScaleSet("ci", "r").Terminated("runner", 143, "Error").Deleted(end.Add(-5*time.Second), 30),
			note: func() *v1alpha1.DeletionNote {
				n := note("arc", "job-over", end.Add(-5*time.Second))
				n.Job = &v1alpha1.Job{ID: "9001", Source: "EphemeralRunner/r"}
				return n
			}(), now: end.Add(time.Second), clean: true, job: &v1alpha1.Job{ID: "9002", Source: "EphemeralRunner/r"},
			want: want{classes: []Class{JobEnded}, deleted: true, deletedBy: "arc", job: "9002", basis: JobOverBasis}},
		{name: "a death on record already is not planned again, and nothing is read for it",
			pod: podtest.Runner("ci", "r").Terminated("runner", 1, "Error"), now: end.Add(time.Second), recorded: true,
			node: node(corev1.Taint{Key: TaintKarpenterDisrupted})},
		{name: "a runner that never ran has no death",
			pod: podtest.Runner("ci", "r").Waiting("runner", "ErrImagePull"), goneAt: end, now: end.Add(time.Minute)},
	}
	cfg := configtest.Enforcing()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := overriddenFor(tc.pod, tc.note).Obj()
			runner, ok := presets.Match(pod, cfg.Presets)
			require.True(t, ok)
			reads := map[string]int{}
			p := Decide(Observation{Pod: pod, Runner: runner, GoneAt: tc.goneAt, Note: tc.note, Now: tc.now,
				KeepSince: tc.now.Add(-cfg.Records.MaxAge.Duration), KeepClean: tc.clean, CleanSince: tc.now.Add(-cfg.Records.CleanMaxAge.Duration),
				Job: func() *v1alpha1.Job { reads["job"]++; return tc.job },
				Node: func() *v1alpha1.NodeState {
					reads["node"]++
					if tc.node == nil {
						return nil
					}
					return NodeStateOf(tc.node)
				},
				Recorded: func(string) bool { return tc.recorded }})
			assert.Equal(t, tc.want.retry, p.Retry, "retry")
			var classes []Class
			abnormal := false
			for _, r := range p.Records {
				classes = append(classes, Class(r.Class))
				abnormal = abnormal || Class(r.Class).Abnormal()
				if tc.want.basis != "" {
					assert.Equal(t, tc.want.basis, r.ClassBasis, "classBasis")
				}
				if tc.node != nil && Class(r.Class).Abnormal() {
					assert.Equal(t, NodeStateOf(tc.node), r.NodeState, "the node's state")
				} else {
					assert.Nil(t, r.NodeState, "no node's state")
				}
				assert.Equal(t, tc.want.deleted, r.Deleted, "deleted")
				assert.Equal(t, tc.want.deleted, r.DeletedAt != nil, "deletedAt: %v", r.DeletedAt)
				if tc.want.vitals {
					assert.NotNil(t, r.Vitals, "the vitals' final reading")
				}
				assert.Equal(t, tc.want.deletedBy, r.DeletedBy, "deletedBy")
				assert.Equal(t, tc.want.startedBy, r.StartedBy, "startedBy")
				if tc.want.job != "" {
					require.NotNil(t, r.Job)
					assert.Equal(t, tc.want.job, r.Job.ID)
				}
			}
			assert.Equal(t, tc.want.classes, classes)
			// Read once, and only for a death about to be recorded; the
			// node only for one an operator must look at.
			assert.Equal(t, min(len(p.Records), 1), reads["job"], "job reads")
			assert.Equal(t, map[bool]int{true: 1}[abnormal], reads["node"], "node reads")
		})
	}
}

// A delete warn mode let through (noted with rule busy) leaves on the
// record what enforce would have refused, as a refusal is kept: beside
// the pod's real refusals, never merged into them, counted once even when
// the pod's own list took it before the pod went.
func TestAWarnModeDeleteLeavesAWouldBeRefusalOnTheRecord(t *testing.T) {
	cfg := configtest.Enforcing()
	deletedAt := end.Add(-time.Second)
	warned := refusal.One{By: "reaper", Verb: "delete", Rule: "busy", At: deletedAt, Version: "7", Warned: true}
	refused := refusal.One{By: "reaper", Verb: "delete", Rule: "busy", At: end.Add(-time.Hour), Version: "3"}
	for _, c := range []struct {
		name   string
		onPod  []refusal.One
		note   *v1alpha1.DeletionNote
		want   []v1alpha1.Refusal
		reason string
	}{
		{name: "warn mode's delete", note: note("reaper", "busy", deletedAt),
			want: []v1alpha1.Refusal{{By: "reaper", Verb: "delete", Rule: "busy", Count: 1, Warned: true}}},
		{name: "beside an earlier real refusal", onPod: []refusal.One{refused}, note: note("reaper", "busy", deletedAt),
			want: []v1alpha1.Refusal{{By: "reaper", Verb: "delete", Rule: "busy", Count: 1, Version: "3"}, {By: "reaper", Verb: "delete", Rule: "busy", Count: 1, Warned: true}}},
		{name: "counted once when the pod's list took it", onPod: []refusal.One{warned}, note: note("reaper", "busy", deletedAt),
			want: []v1alpha1.Refusal{{By: "reaper", Verb: "delete", Rule: "busy", Count: 1, Warned: true}}},
		{name: "an override's delete is no refusal", note: note("reaper", "override", deletedAt)},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := overriddenFor(podtest.Runner("ci", "r").Terminated("runner", 143, "Error").Deleted(deletedAt, 30), c.note)
			if len(c.onPod) > 0 {
				var l v1alpha1.Refusals
				for _, o := range c.onPod {
					l = refusal.Add(l, o)
				}
				v, err := refusal.Format(l)
				require.NoError(t, err)
				w.Annotate(refusal.Annotation, v)
			}
			pod := w.Obj()
			runner, ok := presets.Match(pod, cfg.Presets)
			require.True(t, ok)
			p := Decide(Observation{Pod: pod, Runner: runner, Note: c.note, Now: end.Add(time.Second), KeepSince: end.Add(-time.Hour * 24)})
			require.Len(t, p.Records, 1)
			var got []v1alpha1.Refusal
			if l := p.Records[0].Refusals; l != nil {
				for _, e := range l.Entries {
					e.First, e.Last = metav1.MicroTime{}, metav1.MicroTime{}
					got = append(got, e)
				}
			}
			assert.Equal(t, c.want, got)
		})
	}
}

func TestADeathItsPodsEvictionCausedNamesTheEvictionRequest(t *testing.T) {
	cfg := configtest.Enforcing()
	ref := &v1alpha1.EvictionRequestRef{Names: []string{"drain-n1-r"}, Requesters: []string{"runnerguard.io/drain"}, Eviction: "r-x1"}
	for _, c := range []struct {
		name  string
		pod   *podtest.Wrapper
		named bool
	}{
		{name: "evicted while it ran", pod: podtest.ARCScaleSet("ci", "r").Terminated("runner", 143, "Error").Deleted(end.Add(-5*time.Second), 30), named: true},
		{name: "ended on its own before any deletion", pod: podtest.Runner("ci", "r").Terminated("runner", 1, "Error")},
	} {
		t.Run(c.name, func(t *testing.T) {
			pod := c.pod.Obj()
			runner, ok := presets.Match(pod, cfg.Presets)
			require.True(t, ok)
			now := end.Add(time.Minute)
			p := Decide(Observation{Pod: pod, Runner: runner, Now: now, KeepSince: now.Add(-time.Hour), KeepClean: true, CleanSince: now.Add(-time.Hour),
				EvictionRequest: ref})
			require.Len(t, p.Records, 1)
			if c.named {
				assert.Equal(t, ref, p.Records[0].EvictionRequest)
			} else {
				assert.Nil(t, p.Records[0].EvictionRequest)
			}
		})
	}
}

func TestTheEndingNamesTheEvictionRequestAndWhoAsked(t *testing.T) {
	r := Record{DeathRecord: v1alpha1.DeathRecord{Class: string(IdleRemoved), Deleted: true, DeletedBy: "system:serviceaccount:kube-system:imperative-eviction-responder-controller", DeleteRule: "idle",
		EvictionRequest: &v1alpha1.EvictionRequestRef{Names: []string{"drain-r"}, Requesters: []string{"runnerguard.io/drain"}, HeldFor: &metav1.Duration{Duration: 3 * time.Minute}}}}
	assert.Equal(t, "it had no job when system:serviceaccount:kube-system:imperative-eviction-responder-controller deleted its pod, carrying out eviction request drain-r by runnerguard.io/drain (runnerguard held it 3m for the job)", r.Ending())
}
