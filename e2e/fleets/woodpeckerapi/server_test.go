package woodpeckerapi

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	agentrpc "go.woodpecker-ci.org/woodpecker/v3/agent/rpc"
	"go.woodpecker-ci.org/woodpecker/v3/rpc"
)

// serve runs s on loopback and dials it as the agent does
// (cmd/agent/core: agent_rpc.Dial, then the gRPC client).
func serve(t *testing.T, s *Server, token string) (rpc.Peer, error) {
	t.Helper()
	g := grpc.NewServer(grpc.UnaryInterceptor(s.Interceptor()))
	s.Register(g)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = g.Serve(l) }()
	t.Cleanup(g.Stop)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	conn, err := agentrpc.Dial(ctx, agentrpc.DialConfig{ServerAddr: l.Addr().String(), AgentToken: token,
		KeepaliveTime: time.Minute, KeepaliveTimeout: 20 * time.Second, AuthRefreshEvery: time.Hour})
	if err != nil {
		return nil, err
	}
	t.Cleanup(conn.Close)
	return agentrpc.NewGrpcClient(ctx, conn.MainConn, agentrpc.SetConnectionRetryTimeout(5*time.Second)), nil
}

func TestAnAgentWithAnotherTokenIsRefused(t *testing.T) {
	_, err := serve(t, New("secret"), "other")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Unauthenticated")
}

// The agent's own client takes a workflow, reports it, and learns of its
// cancel through Wait.
func TestTheAgentsClientTakesAWorkflowAndLearnsOfItsCancel(t *testing.T) {
	s := New("secret")
	peer, err := serve(t, s, "secret")
	require.NoError(t, err)
	ctx := context.Background()
	v, err := peer.Version(ctx)
	require.NoError(t, err)
	assert.Equal(t, agentrpc.ClientGrpcVersion, v.GrpcVersion)
	id, err := peer.RegisterAgent(ctx, rpc.AgentInfo{Backend: "kubernetes", Capacity: 1})
	require.NoError(t, err)
	assert.Positive(t, id)

	pods, err := s.Add(Workflow{ID: "101", Repo: "acme/app", TimeoutMinutes: 1, Steps: []Step{
		{Name: "build", Image: "busybox", Commands: []string{"echo hi"}, MemoryLimit: "64Mi"},
		{Name: "test", Image: "busybox", Commands: []string{"echo ok"}},
	}})
	require.NoError(t, err)
	w, err := peer.Next(ctx, rpc.Filter{Labels: map[string]string{"backend": "kubernetes"}})
	require.NoError(t, err)
	require.NotNil(t, w)
	assert.Equal(t, "101", w.ID)
	assert.EqualValues(t, 1, w.Timeout)
	require.Len(t, w.Config.Stages, 2)
	build := w.Config.Stages[0].Steps[0]
	assert.Equal(t, "build", build.Name)
	assert.Equal(t, pods["build"], "wp-"+strings.ToLower(build.UUID))
	assert.Equal(t, "acme/app", build.WorkflowLabels["woodpecker-ci.org/repo-full-name"])
	assert.Equal(t, "acme/app", build.Environment["CI_REPO"])
	assert.Equal(t, map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "64Mi"}}},
		build.BackendOptions["kubernetes"])
	assert.Nil(t, w.Config.Stages[1].Steps[0].BackendOptions)

	require.NoError(t, peer.Init(ctx, w.ID, rpc.WorkflowState{Started: 10}))
	require.NoError(t, peer.Update(ctx, w.ID, rpc.StepState{StepUUID: build.UUID, Started: 11, Finished: 12, Exited: true, ExitCode: 137}))
	peer.EnqueueLog(&rpc.LogEntry{StepUUID: build.UUID, Data: []byte("hi"), Line: 0})
	waited := make(chan bool)
	go func() {
		canceled, err := peer.Wait(ctx, w.ID)
		assert.NoError(t, err)
		waited <- canceled
	}()
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, s.Cancel("101"))
	select {
	case canceled := <-waited:
		assert.True(t, canceled, "Wait returns canceled")
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return on the cancel")
	}
	require.NoError(t, peer.Done(ctx, w.ID, rpc.WorkflowState{Started: 10, Finished: 13, Canceled: true}))
	require.Eventually(t, func() bool {
		st, _ := s.Status("101")
		return strings.Contains(st.Steps[0].Log, "hi")
	}, 10*time.Second, 50*time.Millisecond, "the log, which the client sends in batches")
	st, ok := s.Status("101")
	require.True(t, ok)
	assert.True(t, st.Taken && st.Initialized && st.Done && st.Canceled && st.CancelSent)
	assert.Equal(t, StepStatus{Name: "build", UUID: build.UUID, Pod: pods["build"], Updates: 1, Started: 11, Finished: 12,
		Exited: true, ExitCode: 137, Log: "hi\n"}, st.Steps[0])
}

func TestTheControlQueuesCancelsAndTells(t *testing.T) {
	s := New("secret")
	srv := httptest.NewServer(s)
	defer srv.Close()
	res, err := http.Post(srv.URL+"/workflows", "application/json",
		strings.NewReader(`{"id":"7","repo":"acme/app","steps":[{"name":"build","image":"busybox","commands":["true"]}]}`))
	require.NoError(t, err)
	_ = res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)
	res, err = http.Post(srv.URL+"/workflows/7/cancel", "", nil)
	require.NoError(t, err)
	_ = res.Body.Close()
	assert.Equal(t, http.StatusNoContent, res.StatusCode)
	res, err = http.Get(srv.URL + "/workflows/7")
	require.NoError(t, err)
	defer res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)
	st, _ := s.Status("7")
	assert.True(t, st.CancelSent)
	assert.False(t, st.Taken)
}
