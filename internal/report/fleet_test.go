package report

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/podtest"
)

// A job end is its job's normal end, its owner's delete or the runner's
// clean exit after it (ARC's ephemeral runner exits 0 after its one job):
// the headline counts it apart from the deaths, as the table's meaning
// column says.
func TestTheTableCountsDeathsAndJobEndsApart(t *testing.T) {
	var items []v1alpha1.RunnerDeath
	for i, class := range []death.Class{death.CgroupOOM, death.JobEnded, death.JobEnded, death.JobEnded, death.ErrorExit, death.CleanExit} {
		o := recorded(t, podtest.Runner("ci", string(rune('a'+i))).Terminated("runner", 1, "Error"), "")
		o.Record.Class = string(class)
		o.CreationTimestamp = metav1.NewTime(podtest.Start)
		items = append(items, *o)
	}
	f := Summarize(items, podtest.Start.Add(-time.Hour))
	table := f.Table(168*time.Hour, false, 10)
	assert.Contains(t, table, "2 runner deaths and 4 job ends recorded in the last 7d\n")
	assert.Regexp(t, `job-ended\s+3\s+the job's owner deleted the pod to end the job, or the pod went once its fleet said the job was over: not a death`, table)

	one := Summarize(items[:2], podtest.Start.Add(-time.Hour)).Table(90*time.Minute, false, 10)
	assert.Contains(t, one, "1 runner death and 1 job end recorded in the last 90m\n")
	assert.Equal(t, "no runner deaths or job ends recorded in the last 24h\n", Summarize(nil, podtest.Start).Table(24*time.Hour, false, 10))
}

// Without a window (deaths' default) every record given is counted, and
// the headline says so rather than name a window nobody chose.
func TestTheTableWithoutAWindowCountsEveryRecordOnRecord(t *testing.T) {
	old := recorded(t, podtest.Runner("ci", "old").Terminated("runner", 137, "OOMKilled"), "")
	old.CreationTimestamp = metav1.NewTime(podtest.Start.Add(-30 * 24 * time.Hour))
	recent := recorded(t, podtest.Runner("ci", "recent").Terminated("runner", 1, "Error"), "")
	recent.CreationTimestamp = metav1.NewTime(podtest.Start)
	f := Summarize([]v1alpha1.RunnerDeath{*old, *recent}, time.Time{})
	assert.Equal(t, 2, f.Total)
	assert.Contains(t, f.Table(0, false, 10), "2 runner deaths and 0 job ends on record\n")
	assert.Equal(t, "no runner deaths or job ends on record\n", Summarize(nil, time.Time{}).Table(0, false, 10))
}

func TestRecordsTableStopsAtTheLimit(t *testing.T) {
	a := death.FromObject(recorded(t, podtest.Runner("ci", "a").Terminated("runner", 137, "OOMKilled"), ""))
	b := death.FromObject(recorded(t, podtest.Runner("ci", "b").Terminated("runner", 1, "Error"), "bob"))
	table := RecordsTable([]death.Record{a, b}, true, 1)
	assert.Regexp(t, `NAMESPACE\s+POD\s+CLASS\s+EXIT\s+REASON\s+DELETED BY\s+ENDED\s+NODE\s+PRESET\s+PEAK\s+OOM KILLS\s+REFUSED\s+REPORTED\n`, table)
	assert.Regexp(t, `ci\s+a\s+cgroup-oom\s+137\s+OOMKilled\s+-`, table)
	assert.NotContains(t, table, "bob")
}

// An idle runner its fleet removed is neither a death nor a job end: the
// headline counts it apart from both.
func TestTheTableCountsIdleRemovalsApartFromDeathsAndJobEnds(t *testing.T) {
	var items []v1alpha1.RunnerDeath
	for i, class := range []death.Class{death.IdleRemoved, death.JobEnded, death.IdleRemoved, death.SigKill} {
		o := recorded(t, podtest.ARCScaleSet("ci", string(rune('a'+i))).Terminated("runner", 143, "Error"), "")
		o.Record.Class = string(class)
		o.CreationTimestamp = metav1.NewTime(podtest.Start)
		items = append(items, *o)
	}
	table := Summarize(items, podtest.Start.Add(-time.Hour)).Table(168*time.Hour, false, 10)
	assert.Contains(t, table, "1 runner death, 1 job end and 2 idle removals recorded in the last 7d\n")
	assert.Regexp(t, `idle-removed\s+2\s+the fleet removed a runner that had no job`, table)
}
