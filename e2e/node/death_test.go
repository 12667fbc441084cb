//go:build node

package node

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
	"github.com/runnerguard/runnerguard/vitals/record"
)

// Each runner dies its own way in a real container; the kubelet reports
// how, the vitals sidecar what the memory cgroup saw, and the guard writes
// the death record when the dead runner's pod is deleted.
func TestRunnerDeathsAreRecordedWithTheirClass(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		exitCode int32
		reason   string
		class    death.Class
		// oom: the pod's memory peak passed the runner's 64Mi limit.
		oom bool
		// oomKillCounted: the vitals count the kernel's kill in their
		// stream, their final reading and the shared files the runner
		// reads, and the record's oomConfirmed says so.
		oomKillCounted bool
	}{
		{name: "a runner that finishes its job cleanly is a clean exit",
			args: []string{"job", "2"}, exitCode: 0, reason: "Completed", class: death.CleanExit},
		{name: "a runner that allocates past its memory limit is OOM-killed and recorded as cgroup-oom",
			args: []string{"oom", "200M", "2"}, exitCode: 137, reason: "OOMKilled", class: death.CgroupOOM, oom: true},
		{name: "a runner whose step is OOM-killed while the runner exits 0 is still a cgroup-oom",
			args: []string{"child-oom", "200M"}, exitCode: 0, reason: "OOMKilled", class: death.CgroupOOM, oom: true, oomKillCounted: true},
		{name: "a runner that exits 9 was killed from outside",
			args: []string{"job", "1", "9"}, exitCode: 9, reason: "Error", class: death.ExternalKill},
		{name: "a runner that segfaults is a crash",
			args: []string{"segfault"}, exitCode: 139, reason: "Error", class: death.Crash},
	}
	ns := newNamespace(t)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pod := start(t, runnerPod(ns, "runner-"+string(rune('a'+i)), "64Mi", tc.args...))
			pod = waitPod(t, pod, "the runner's end and the sidecar's final reading", 90*time.Second, finished)
			term := containerStatus(pod, "runner").State.Terminated
			assert.Equal(t, tc.exitCode, term.ExitCode, "the kubelet's exit code")
			assert.Equal(t, tc.reason, term.Reason, "the kubelet's reason")
			final, err := record.ParseFinal(containerStatus(pod, runnerpod.VitalsContainer).State.Terminated.Message)
			require.NoError(t, err, "the sidecar's termination message is its final reading")
			if tc.oom {
				require.NotNil(t, final.Peak)
				assert.GreaterOrEqual(t, *final.Peak, uint64(64<<20), "the pod's memory peak passed the runner's limit")
			}
			if tc.oomKillCounted {
				assert.Positive(t, final.OOMKill, "the final reading counts the kernel's OOM kill")
				assert.True(t, streamSawOOMKill(t, pod), "a vitals line on the sidecar's stdout counts the OOM kill")
				// The runner lives on after its step's death and prints the
				// shared memory.events, as a job's next step could. (The
				// kubelet removes an ended pod's emptyDir: the files are
				// evidence for a living runner only.)
				assert.Regexp(t, `vitals: .*oom_kill [1-9]`, logs(t, pod, "runner"), "the runner read the OOM kill in its shared files")
			}

			// The fleet removes the dead runner's pod; the guard allows it
			// and writes the record.
			require.NoError(t, as(t, reaper).Delete(context.Background(), pod))
			var recs []death.Record
			require.Eventually(t, func() bool {
				recs = deathRecords(t, pod)
				return len(recs) > 0
			}, 30*time.Second, 500*time.Millisecond, "a RunnerDeath")
			// The watcher's last chance to write a second: the pod's
			// removal, which it sees before a later runner's death.
			require.Eventually(t, func() bool { return gone(t, pod) }, time.Minute, 500*time.Millisecond, "the pod removed")
			laterDeathRecorded(t, ns, "marker-"+string(rune('a'+i)))
			recs = deathRecords(t, pod)
			require.Len(t, recs, 1, "one death, one record")
			r := recs[0]
			b, _ := json.Marshal(r)
			t.Logf("death record: %s", b)
			assert.Equal(t, string(tc.class), r.Class)
			require.NotNil(t, r.ExitCode)
			assert.Equal(t, tc.exitCode, *r.ExitCode)
			assert.Equal(t, tc.reason, r.Reason)
			assert.Equal(t, nodeName, r.Node)
			assert.Equal(t, "runner", r.Container)
			require.NotNil(t, r.Vitals, "the sidecar's final reading is joined to the record")
			if tc.oomKillCounted {
				require.NotNil(t, r.OOMConfirmed)
				assert.True(t, *r.OOMConfirmed, "the vitals confirm the OOM class")
			}
			if !tc.oom {
				return
			}
			// The record speaks of the runner container itself, and so does
			// why once the pod is gone, with the runner's last words when
			// its end was an error (the kubelet falls back to the log's
			// tail only then).
			require.NotNil(t, r.FinishedAt)
			// On cgroup v1 the kernel counts the kill of a container's
			// own process only in that container's cgroup, which runc
			// removes as the process dies: the sidecar's poll sees the
			// count in some runs and not in others, however fast the
			// machine. A step killed while its container lives on (child-oom)
			// is always seen. Either way the record must say which. (Only
			// the poll can miss: see TestEveryOOMKillIsCountedWhereNotified.)
			missed := tc.exitCode != 0 && r.Vitals != nil && r.Vitals.Cgroup == "v1" && r.Vitals.OOMKill == 0
			// With the kernel's OOM notification no removal races the count.
			assert.False(t, missed && r.Vitals.OOMWatch == "notified", "a notified sidecar counts every kill")
			if missed {
				t.Log("the sidecar did not see the kill in the runner's own cgroup before runc removed it")
				assertOwnCgroup(t, r, 64<<20)
			} else {
				assertOwnOOMKill(t, r, 64<<20, r.FinishedAt.Time)
			}
			require.Eventually(t, func() bool { return gone(t, pod) }, 30*time.Second, 250*time.Millisecond)
			out := runWhy(t, pod.Name, "-n", ns)
			t.Logf("runnerguard why %s -n %s:\n%s", pod.Name, ns, out)
			assert.Contains(t, out, `runner "runner" died: cgroup-oom`)
			switch {
			case r.Vitals != nil && r.Vitals.PeakUnknown:
				assert.Contains(t, out, `memory of the runner container "runner" (its own cgroup, v1): peak unknown (the cgroup was removed between the sidecar's last reading and the OOM kill; the kill came at its limit) of 64Mi limit`)
			case missed:
				assert.Regexp(t, `memory of the runner container "runner" \(its own cgroup, v1\): peak \S+ of 64Mi limit, oom \d+, oom_kill 0`, out)
			default:
				assert.Regexp(t, `memory of the runner container "runner" \(its own cgroup, v[12]\): peak \S+ of 64Mi limit, oom \d+, oom_kill 1, first OOM kill seen at `, out)
			}
			if missed {
				assert.Contains(t, out, "the vitals counted no OOM kill here: on cgroup v1", "why says why the evidence does not show the kill its verdict names")
			} else {
				assert.Contains(t, out, "the vitals confirm an OOM kill")
			}
			if tc.exitCode != 0 {
				assert.Contains(t, out, "last words")
				assert.Contains(t, out, "runner: allocating 200M", "the runner's last log line before the kill")
			}
		})
	}
}

// assertOwnOOMKill asserts that r's vitals are those of the runner
// container's own cgroup and show its OOM kill: its own limit (not the
// pod's, which holds the vitals sidecar too), a peak that reached that limit
// and never passed it, one kill counted, and the moment the sidecar first
// saw it, within the container's life (before until; the API's times are
// whole seconds).
func assertOwnOOMKill(t *testing.T, r death.Record, limit int64, until time.Time) {
	t.Helper()
	assertOwnCgroup(t, r, limit)
	v := r.Vitals
	if v.Peak != nil {
		assert.GreaterOrEqual(t, *v.Peak, limit*9/10, "its peak reached its limit")
	}
	assert.Equal(t, int64(1), v.OOMKill, "the kernel's one OOM kill, counted in the container's own cgroup")
	require.NotNil(t, v.OOMKillAt, "the OOM's time")
	require.NotNil(t, r.StartedAt)
	assert.False(t, v.OOMKillAt.Time.Before(r.StartedAt.Time), "the OOM kill %s after the container's start %s", v.OOMKillAt, r.StartedAt)
	assert.False(t, v.OOMKillAt.Time.After(until.Add(time.Second)), "the OOM kill %s before %s", v.OOMKillAt, until)
}

// assertOwnCgroup asserts that r's vitals are those of the runner
// container's own cgroup, its own limit (not the pod's, which holds the
// vitals sidecar too) and a peak that never passed it, with the pod's
// reading beside them.
func assertOwnCgroup(t *testing.T, r death.Record, limit int64) {
	t.Helper()
	v := r.Vitals
	require.NotNil(t, v, "the sidecar's final reading is joined to the record")
	require.Equal(t, death.ScopeContainer, v.Scope, "the vitals are the runner container's own cgroup's")
	require.NotNil(t, v.Limit)
	assert.Equal(t, limit, *v.Limit, "the runner container's own limit")
	if v.PeakUnknown {
		// v1: the cgroup went between the last reading and the kill.
		assert.Equal(t, "v1", v.Cgroup)
		assert.Nil(t, v.Peak, "no stale sample stands for the peak")
	} else {
		require.NotNil(t, v.Peak)
		assert.LessOrEqual(t, *v.Peak, limit, "a container's own peak never passes its limit")
	}
	require.NotNil(t, v.Pod, "the pod's reading, which differs, beside it")
	if v.Pod.Limit != nil { // none when a container of the pod has none
		assert.Greater(t, *v.Pod.Limit, limit, "the pod's limit includes the vitals sidecar's")
	}
}

// streamSawOOMKill reports whether a vitals line on the sidecar's stdout
// counts an OOM kill, in the pod's cgroup or one of its containers'.
func streamSawOOMKill(t *testing.T, pod *corev1.Pod) bool {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(logs(t, pod, runnerpod.VitalsContainer)))
	for sc.Scan() {
		var l record.Line
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		if e := l.Pod.Events; e != nil && e.OOMKill > 0 {
			return true
		}
		for _, c := range l.Containers {
			if c.Events != nil && c.Events.OOMKill > 0 {
				return true
			}
		}
	}
	return false
}

// laterDeathRecorded runs a runner that fails at once in ns and waits for
// its record: the watcher, which sees runner pods in the API server's
// order, has by then seen every change to runner pods made before it.
func laterDeathRecorded(t *testing.T, ns, name string) {
	t.Helper()
	marker := start(t, runnerPod(ns, name, "64Mi", "job", "0", "1"))
	require.Eventually(t, func() bool { return len(deathRecords(t, marker)) == 1 }, 90*time.Second, 500*time.Millisecond,
		"a later runner's death recorded")
}
