//go:build e2e

package api

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// statusRefused is what the policy says when a status the guard decides by
// is written by a principal other than the pod's node.
const statusRefused = "only the pod's own node (system:node:<spec.nodeName>, group system:nodes) may change the status that decides whether a runner is busy"

// podGC is kube-controller-manager's pod GC, as the chart's default
// policy.podGarbageCollectors names it.
const podGC = "system:serviceaccount:kube-system:pod-garbage-collector"

// nodeIdentity is a kubelet's identity: what the Node authorizer and
// NodeRestriction know a node by.
func nodeIdentity(node string) principal {
	return principal{"system:node:" + node, []string{"system:nodes", "system:authenticated"}}
}

// The status the guard decides by (the phase, startTime and the runner
// containers' states: rules 3 to 5, the protection cap and the pod's own
// deadline, and the delete webhook's matchConditions) is written by the
// pod's node only. A principal granted pods/status anywhere else cannot make
// a busy runner look exited, finished or old enough to be let go; the
// kubelet of the pod's node, pod GC marking an orphan Failed, and the
// conditions the scheduler, the eviction API and taint eviction write pass.
func TestOnlyThePodsNodeWritesTheStatusTheGuardDecidesBy(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, nil)
	writesStatus := authorizationv1.ResourceAttributes{Verb: "update", Resource: "pods", Subresource: "status"}
	withStatus := func(p principal) principal { grant(t, ns, p, statusWriter, writesStatus); return p }
	statusSA := withStatus(serviceAccount("system:serviceaccount:" + ns + ":status-writer"))
	itsNode := withStatus(nodeIdentity("node-e2e"))
	otherNode := withStatus(nodeIdentity("node-other"))
	gc := withStatus(serviceAccount(podGC))
	operator := withStatus(person("olga@example.com"))
	mayOverride(t, ns, operator)
	// A node's name without the nodes' group is not a node.
	impostor := withStatus(principal{"system:node:node-e2e", []string{"system:authenticated"}})

	longAgo := metav1.NewTime(time.Now().Add(-200 * time.Hour).Truncate(time.Second))
	exited := func(p *corev1.Pod) {
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 0, Reason: "Completed", StartedAt: p.Status.ContainerStatuses[0].State.Running.StartedAt, FinishedAt: metav1.Now(),
		}}
	}
	old := func(p *corev1.Pod) { p.Status.ContainerStatuses[0].State.Running.StartedAt = longAgo }
	startedLongAgo := func(p *corev1.Pod) { p.Status.StartTime = &longAgo }
	succeeded := func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }
	failed := func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }
	disruption := func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
			Reason: "PreemptionByScheduler", LastTransitionTime: metav1.Now()})
	}

	cases := []struct {
		name    string
		by      principal
		change  func(*corev1.Pod)
		refused bool
	}{
		{"a principal granted pods/status cannot make a busy runner look exited 0", statusSA, exited, true},
		{"nor 200 hours old (the protection cap)", statusSA, old, true},
		{"nor started 200 hours ago (the pod's own deadline)", statusSA, startedLongAgo, true},
		{"nor finished", statusSA, succeeded, true},
		{"another node's kubelet cannot write this pod's runner state", otherNode, exited, true},
		{"a node's name without the nodes' group is no node", impostor, exited, true},
		{"pod GC cannot make the runner look exited", gc, exited, true},
		{"pod GC cannot make the pod look succeeded", gc, succeeded, true},
		{"the pod's own kubelet reports the runner exited", itsNode, exited, false},
		{"the pod's own kubelet ends the pod", itsNode, succeeded, false},
		{"pod GC marks an orphan Failed before it force-deletes it", gc, func(p *corev1.Pod) { failed(p); disruption(p) }, false},
		{"a DisruptionTarget condition (scheduler, eviction API, taint eviction) is anyone's with pods/status", statusSA, disruption, false},
		{"an operator granted the override may", operator, exited, false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := running(podtest.Runner(ns, podName(i)).ActiveDeadline(3600, time.Now().Add(-10*time.Minute)), "runner")
			pod = create(t, nil, pod)
			got := &corev1.Pod{}
			require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(pod), got))
			require.NotNil(t, got.Status.ContainerStatuses[0].State.Running, "the runner is running")
			before := got.Status.DeepCopy()
			tc.change(got)
			err := tc.by.client(t).Status().Update(ctx, got)
			if !tc.refused {
				require.NoError(t, err)
				return
			}
			requireRefusedByPolicy(t, err, statusRefused)
			require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(pod), got))
			require.Equal(t, before.ContainerStatuses, got.Status.ContainerStatuses, "the runner's state is as its node wrote it")
			require.Equal(t, before.StartTime, got.Status.StartTime)
			require.Equal(t, before.Phase, got.Status.Phase)
			require.Equal(t, runnerpod.Running, runnerpod.RunnerStatus(got, []string{"runner"}).State)
		})
	}
}
