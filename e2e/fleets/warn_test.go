//go:build fleets

package fleets

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// warnLayout is the manager outside the cluster with a long-lived token
// (the layout whose ownership the guard has the least to go on), building
// in a namespace in warn mode.
var warnLayout = layout{name: "warn-outside-long-lived-token", warn: true}

var warnCases = []gitlabCase{{
	name:   "a job that succeeds ends by its manager's delete",
	script: []string{"echo " + jobStarted, "sleep 3", "echo fleet-job-done"},
	state:  "success", class: death.JobEnded, check: endedByManager,
}, {
	// The executor fails the job as soon as its pod watch sees the
	// deletion, with an error of its own (a system failure); the build
	// container's main shell ignores the SIGTERM and ends by the SIGKILL
	// a grace period later.
	name:   "a reaper's delete of the running job passes with a warning, and the record names the reaper",
	script: []string{"echo " + jobStarted, "sleep 600"},
	// The record keeps the reaper's delete as warn mode's refusal: what
	// enforce would have refused.
	during: reaperWarned, refusedBy: reaper, warned: true,
	state: "failed", reasons: []string{"runner_system_failure"}, class: death.SigKill, check: deletedByReaper,
}}

// In warn mode the guard refuses nothing: the manager's own work is
// neither refused nor warned of, and a reaper's delete of a busy pod goes
// through with a warning and is on the record as warn mode's.
func TestGitLabRunnerWarnMode(t *testing.T) {
	// Outside the cluster, its ServiceAccount lives with the builds
	// (nameLayouts named them, before the chart's reports named the
	// manager).
	m := startManager(t, warnLayout)
	allRan := runGitLabCases(t, m, warnCases)
	t.Run("nothing of the manager's is refused or warned of", func(t *testing.T) { managerUnwarned(t, m) })
	if !allRan || t.Failed() {
		return // the count below is of every case's record
	}
	out := runnerguardDeaths(t, m.buildNS)
	assert.Equal(t, "1 runner death and 1 job end on record", strings.SplitN(out, "\n", 2)[0], out)
}

// reaperWarned: the reaper's delete of the running build pod passes, and
// the guard says what enforce mode would have done: to the reaper, as an
// admission warning, and in a Warning Event naming it.
func reaperWarned(t *testing.T, m *manager, id int64, pod string) {
	t.Helper()
	c, warnings := warnedAs(t, reaper)
	require.NoError(t, c.CoreV1().Pods(m.buildNS).Delete(context.Background(), pod, deleteOptions()), "warn mode lets the reaper delete a busy pod")
	if assert.Len(t, warnings.all(), 1, "one admission warning to the reaper") {
		w := warnings.all()[0]
		assert.Contains(t, w, "runnerguard (warn mode) allowed this; enforce mode would have refused it: runner container \"build\" of pod "+m.buildNS+"/"+pod)
		assert.Contains(t, w, fmt.Sprintf("(job %q, name %q, project %q)", strconv.FormatInt(id, 10), "fleet-"+strconv.FormatInt(id, 10), "7"), "the job it loses")
		assert.Contains(t, w, "removing the pod now loses that job")
	}
	waitEvent(t, m.buildNS, pod, "DeleteRefusedInWarnMode", reaper)
}

// deletedByReaper: the reaper's delete ended the job, and the record says
// it was allowed only by warn mode; nothing was refused.
func deletedByReaper(t *testing.T, m *manager, r death.Record) {
	t.Helper()
	assert.True(t, r.Deleted, "the deletion ended the container")
	assert.Equal(t, reaper, r.DeletedBy, "the first delete, the reaper's, not the manager's cleanup after it")
	assert.Equal(t, string(runnerpod.RuleBusy), r.DeleteRule)
	assert.Contains(t, runnerguardWhy(t, m.buildNS, r.Pod),
		"requested by "+reaper+": allowed only because the guard was in warn mode; enforce would have refused it")
}

// managerUnwarned: no Warning Event names the manager, and the manager's
// client was warned of nothing (client-go logs every admission warning).
func managerUnwarned(t *testing.T, m *manager) {
	t.Helper()
	list := &eventsv1.EventList{}
	require.NoError(t, admin.List(context.Background(), list, client.InNamespace(m.buildNS)))
	for _, e := range list.Items {
		assert.False(t, e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, m.username),
			"a Warning Event names the manager: %s %s: %s", e.Reason, e.Regarding.Name, e.Note)
	}
	b, err := os.ReadFile(m.log)
	require.NoError(t, err)
	for _, w := range []string{"runnerguard (warn mode)", "runnerguard:"} {
		assert.NotContains(t, string(b), w, "the manager was warned (its log %s)", m.log)
	}
}

// warnedAs is a clientset acting as user (see as) and the admission
// warnings its requests got.
func warnedAs(t *testing.T, user string) (*kubernetes.Clientset, *warningLog) {
	t.Helper()
	cfg := rest.CopyConfig(adminCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters", "system:authenticated"}}
	w := &warningLog{}
	cfg.WarningHandler = w
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c, w
}

// warningLog keeps the admission warnings a client got.
type warningLog struct{ syncList[string] }

func (w *warningLog) HandleWarningHeader(_ int, _ string, text string) { w.add(text) }
