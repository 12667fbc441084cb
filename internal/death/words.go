package death

import "slices"

// A class as a person reads it, written once: what it means (the CLI's
// summary, a report's summary, a CloudEvent) and its one-line title on a
// commit, and whether a death of it is told at all. A new class is its
// constant and rule in class.go and its line here.
type words struct {
	title, meaning string
	// untold: no job was lost with it, so nothing is told on the job's
	// commit.
	untold bool
}

var classWords = map[Class]words{
	CleanExit:       {untold: true, meaning: "the runner (or the job's last part) ended on its own with exit 0, not a death; a \"lost communication\" a CI service shows here is its completion handshake"},
	CgroupOOM:       {title: "Runner OOM-killed", meaning: "the container hit its memory limit and the kernel OOM-killed it"},
	SigKill:         {title: "Runner killed (SIGKILL)", meaning: "SIGKILL from inside (a guest OOM in a VM runtime) or from the runtime; check the vitals' oom_kill"},
	SigTerm:         {title: "Runner stopped (SIGTERM): its pod was deleted or drained", meaning: "SIGTERM: the pod was deleted or drained"},
	ExternalKill:    {title: "Runner's sandbox torn down from outside", meaning: "a literal exit 9, which no runner code path emits: the sandbox was torn down from outside"},
	Crash:           {title: "Runner crashed", meaning: "the runner crashed (segfault or abort)"},
	ErrorExit:       {meaning: "the runner's own failure exit code"},
	NodeEviction:    {title: "Runner evicted under node pressure", meaning: "the kubelet evicted the pod under node pressure"},
	NodeLost:        {title: "Runner's node was lost", meaning: "the node or its kubelet vanished"},
	DeletedRunning:  {title: "Runner's pod deleted while its job ran", meaning: "the pod was removed at once while its runner was still running"},
	JobEnded:        {untold: true, meaning: "the job's owner deleted the pod to end the job, or the pod went once its fleet said the job was over: not a death"},
	JobFailed:       {meaning: "a part of the job (a step, a command) ended with its own failure code: the job's result, which its CI service shows, not a death"},
	ProcessOOM:      {title: "A process of the job was OOM-killed", meaning: "the kernel OOM-killed a process of the job (a step, a child), and the container lived on after it: a memory limit hit by one process, not the container's kill"},
	IdleRemoved:     {untold: true, meaning: "the fleet removed a runner that had no job (an ARC scale-down): neither a death nor a job's end"},
	JobTimeout:      {title: "Job hit its pod's time limit", meaning: "the job hit its time limit: the pod's activeDeadlineSeconds ran out, or its owner ended it at its timeout, just before that deadline"},
	ProbeKill:       {title: "Runner killed for failing its liveness probe", meaning: "the kubelet killed the runner for failing its liveness probe"},
	StorageEviction: {title: "Runner evicted for its ephemeral storage", meaning: "the kubelet evicted the pod for using more ephemeral storage than its own limit (a container's, the pod's, or an emptyDir's)"},
	NodeDisrupted:   {title: "Runner's node was taken away", meaning: "the runner's node was being taken away (a drain, Karpenter, the cluster autoscaler, the Node's deletion or a node shutdown)"},
	Preempted:       {title: "Runner preempted by a higher-priority pod", meaning: "the scheduler preempted the pod for a higher-priority one"},
	// A zombie's end is not told: the job its fleet named was lost with
	// an earlier runner, whose death was told.
	ZombieEnded: {untold: true, meaning: "the runner was a zombie (alive, but its fleet's objects showed it would never run a job) and was ended for it: no job was lost with it"},
}

// Meaning says what the class means, for the human reading the record
// (the classes' table in docs/design); "" for a class this build does not
// know.
func (c Class) Meaning() string { return classWords[c].meaning }

// Title is the class in one line, the first a developer reads of a death
// on the job's commit; "" where the record must say more (an error exit's
// code) or the class is unknown.
func (c Class) Title() string { return classWords[c].title }

// Told reports whether a death of this class is told on the job's commit
// at all: not a clean exit, a job's normal end, an idle runner's removal
// or a zombie's end.
func (c Class) Told() bool { return !classWords[c].untold }

// Classes is every class this build knows, sorted.
func Classes() []Class {
	cs := make([]Class, 0, len(classWords))
	for c := range classWords {
		cs = append(cs, c)
	}
	slices.Sort(cs)
	return cs
}
