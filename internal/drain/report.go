package drain

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// Report is a drain's outcome node by node and pod by pod: what
// `drain -o json|yaml` prints, for a pipeline that acts on it. The log
// lines say the same as it happens.
type Report struct {
	// Result is drained, timed-out, refused or, with --dry-run, planned.
	Result string `json:"result"`
	// DryRun is --dry-run's client or server; "" for a drain.
	DryRun string `json:"dryRun,omitempty"`
	// Presets says where the runner presets came from.
	Presets string `json:"presets,omitempty"`
	// Refusals say why a refused drain changed nothing.
	Refusals []string `json:"refusals,omitempty"`
	// EndedJobs counts the jobs the deadline ended.
	EndedJobs int          `json:"endedJobs"`
	Nodes     []NodeReport `json:"nodes"`

	// mu: kubectl's drain library reports the other pods from a goroutine
	// each.
	mu sync.Mutex
}

// NodeReport is one node's part of the drain.
type NodeReport struct {
	Name     string      `json:"name"`
	Cordoned bool        `json:"cordoned"`
	Pods     []PodReport `json:"pods"`
}

// PodReport is what the drain did with one pod.
type PodReport struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Preset is the runner's; "" for the node's other pods, which go by
	// kubectl drain's rules.
	Preset string `json:"preset,omitempty"`
	// Job is the runner's job as its fleet names it.
	Job     string     `json:"job,omitempty"`
	Outcome PodOutcome `json:"outcome"`
	Why     string     `json:"why,omitempty"`
	// Server is, with --dry-run=server, the API server's answer to the
	// pod's eviction as a dry run.
	Server string `json:"serverDryRun,omitempty"`
	// node is the NodeReport the pod belongs to.
	node string
}

// PodOutcome is what happened to a pod.
type PodOutcome string

// The pod outcomes.
const (
	Evicted PodOutcome = "evicted"
	// Ended: the deadline ended the runner's job (the override, then its
	// eviction).
	Ended PodOutcome = "ended"
	// Waiting: a busy runner still running its job when the drain ended
	// (--timeout).
	Waiting PodOutcome = "waiting"
	// Gone: a pod waited for left without the drain's eviction.
	Gone PodOutcome = "gone"
	// Failed: kubectl's drain library could not remove the pod.
	Failed PodOutcome = "failed"
	// WouldEvict and WouldWait are a dry run's plan.
	WouldEvict PodOutcome = "would-evict"
	WouldWait  PodOutcome = "would-wait"
)

// NewReport is the report of a drain of nodes, none touched yet.
func NewReport(nodes []string) *Report {
	r := &Report{Result: "drained"}
	for _, n := range nodes {
		r.Nodes = append(r.Nodes, NodeReport{Name: n, Pods: []PodReport{}})
	}
	return r
}

// StepPod is a runner's entry, from the drain's judgement of it.
func StepPod(s Step, outcome PodOutcome, why string) PodReport {
	return PodReport{Namespace: s.Pod.Namespace, Name: s.Pod.Name, Preset: string(s.Runner.Runner.Preset.Name),
		Job: jobName(s), Outcome: outcome, Why: why, node: s.Pod.Spec.NodeName}
}

// OtherPod is the entry of a pod that goes by kubectl drain's rules.
func OtherPod(p *corev1.Pod, outcome PodOutcome, why string) PodReport {
	return PodReport{Namespace: p.Namespace, Name: p.Name, Outcome: outcome, Why: why, node: p.Spec.NodeName}
}

// jobName is the job's name for a structure, which escapes what it must
// itself: "" when the fleet names none.
func jobName(s Step) string {
	if s.Job == nil {
		return ""
	}
	return jobText(s.Job)
}

// Cordoned records that node is cordoned.
func (r *Report) Cordoned(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := r.node(node); n != nil {
		n.Cordoned = true
	}
}

// Refused records why the drain changes nothing.
func (r *Report) Refused(why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Refusals = append(r.Refusals, why)
}

// Set records p, in place of what was said of the same pod before.
func (r *Report) Set(p PodReport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.set(p)
}

// Waiting records the runners still waited for now; a pod waited for
// before and no longer among them left by itself. A pod the drain evicted
// or ended stays so while it terminates.
func (r *Report) Waiting(now []PodReport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	still := map[[2]string]bool{}
	for _, p := range now {
		still[[2]string{p.Namespace, p.Name}] = true
		if was := r.find(p); was == nil || was.Outcome != Evicted && was.Outcome != Ended {
			r.set(p)
		}
	}
	for i := range r.Nodes {
		for j := range r.Nodes[i].Pods {
			p := &r.Nodes[i].Pods[j]
			if p.Outcome == Waiting && !still[[2]string{p.Namespace, p.Name}] {
				p.Outcome, p.Why = Gone, "left without the drain's eviction"
			}
		}
	}
}

// Finish sets the result from how the drain ended.
func (r *Report) Finish(o Outcome, dryRun string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.EndedJobs = o.Ended
	if dryRun != "none" {
		r.DryRun = dryRun
	}
	switch {
	case o.Refused:
		r.Result = "refused"
	case o.TimedOut:
		r.Result = "timed-out"
	case dryRun != "" && dryRun != "none":
		r.Result = "planned"
	default:
		r.Result = "drained"
	}
}

func (r *Report) set(p PodReport) {
	if was := r.find(p); was != nil {
		*was = p
		return
	}
	if n := r.node(p.node); n != nil {
		n.Pods = append(n.Pods, p)
	}
}

// find is the entry of p's pod, nil when there is none yet.
func (r *Report) find(p PodReport) *PodReport {
	n := r.node(p.node)
	if n == nil {
		return nil
	}
	for i := range n.Pods {
		if n.Pods[i].Namespace == p.Namespace && n.Pods[i].Name == p.Name {
			return &n.Pods[i]
		}
	}
	return nil
}

func (r *Report) node(name string) *NodeReport {
	for i := range r.Nodes {
		if r.Nodes[i].Name == name {
			return &r.Nodes[i]
		}
	}
	return nil
}
