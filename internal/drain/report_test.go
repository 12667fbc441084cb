package drain_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runnerguard/runnerguard/internal/drain"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// The report keeps one entry a pod, under its node: what the drain did
// last. A runner evicted stays evicted while it terminates; one waited for
// that leaves without the drain's eviction is gone.
func TestReport(t *testing.T) {
	r := drain.NewReport([]string{"n1", "n2"})
	busy := drain.Judge(runner(t, podtest.Runner("ci", "busy").Node("n1").Running("runner").Obj(), runnerpod.JobNotRead), now)
	left := drain.Judge(runner(t, podtest.Runner("ci", "left").Node("n1").Running("runner").Obj(), runnerpod.JobNotRead), now)
	idle := drain.Judge(runner(t, podtest.Runner("ci", "idle").Node("n2").Running("runner").Obj(), runnerpod.JobNotRead), now)
	r.Cordoned("n1")
	r.Set(drain.StepPod(idle, drain.Evicted, "idle"))
	r.Set(drain.OtherPod(podtest.Plain("ci", "web").Node("n2").Obj(), drain.Evicted, "kubectl drain's rules: evicted"))
	r.Waiting([]drain.PodReport{drain.StepPod(busy, drain.Waiting, "busy"), drain.StepPod(left, drain.Waiting, "busy"), drain.StepPod(idle, drain.Waiting, "terminating")})
	r.Set(drain.StepPod(busy, drain.Ended, "the deadline"))
	r.Waiting([]drain.PodReport{drain.StepPod(busy, drain.Waiting, "terminating")})
	r.Finish(drain.Outcome{Ended: 1}, "none")

	assert.Equal(t, "drained", r.Result)
	assert.Equal(t, 1, r.EndedJobs)
	assert.True(t, r.Nodes[0].Cordoned)
	assert.False(t, r.Nodes[1].Cordoned)
	outcomes := map[string]drain.PodOutcome{}
	for _, n := range r.Nodes {
		for _, p := range n.Pods {
			outcomes[n.Name+"/"+p.Name] = p.Outcome
		}
	}
	assert.Equal(t, map[string]drain.PodOutcome{"n1/busy": drain.Ended, "n1/left": drain.Gone, "n2/idle": drain.Evicted, "n2/web": drain.Evicted}, outcomes)

	r.Finish(drain.Outcome{TimedOut: true}, "none")
	assert.Equal(t, "timed-out", r.Result)
	r.Finish(drain.Outcome{}, "server")
	assert.Equal(t, "planned", r.Result)
	assert.Equal(t, "server", r.DryRun)
}
