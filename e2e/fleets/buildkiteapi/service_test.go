package buildkiteapi

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func call(t *testing.T, srv *httptest.Server, method, path, token string, body io.Reader) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, body)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Token "+token)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out := map[string]any{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func js(v any) io.Reader {
	b, _ := json.Marshal(v)
	return bytes.NewReader(b)
}

// A job through the stack's calls and the agent's, to a cancel.
func TestAJobFromScheduledToCanceled(t *testing.T) {
	svc := New("acme", "tok", "q")
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	svc.SetBase(srv.URL)
	svc.Add(Job{ID: "j1", Pipeline: "app", StepKey: "build", Command: "make"})

	code, _ := call(t, srv, "POST", "/v3/stacks/register", "wrong", js(map[string]any{"key": "s", "queue_key": "q"}))
	assert.Equal(t, http.StatusUnauthorized, code)
	code, reg := call(t, srv, "POST", "/v3/stacks/register", "tok", js(map[string]any{"key": "s", "type": "kubernetes", "queue_key": "q", "metadata": map[string]string{}}))
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "q", reg["cluster_queue_key"])

	code, list := call(t, srv, "GET", "/v3/stacks/s/scheduled-jobs?queue_key=q&limit=10", "tok", nil)
	require.Equal(t, http.StatusOK, code)
	jobs := list["jobs"].([]any)
	require.Len(t, jobs, 1)
	assert.Equal(t, []any{"queue=q"}, jobs[0].(map[string]any)["agent_query_rules"])

	code, res := call(t, srv, "PUT", "/v3/stacks/s/scheduled-jobs/batch-reserve", "tok", js(map[string]any{"job_uuids": []string{"j1", "nope"}}))
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, []any{"j1"}, res["reserved"])
	assert.Equal(t, []any{"nope"}, res["not_reserved"])
	_, list = call(t, srv, "GET", "/v3/stacks/s/scheduled-jobs?queue_key=q", "tok", nil)
	assert.Empty(t, list["jobs"], "a reserved job is no longer offered")

	code, job := call(t, srv, "GET", "/v3/stacks/s/jobs/j1", "tok", nil)
	require.Equal(t, http.StatusOK, code)
	env := job["env"].(map[string]any)
	assert.Equal(t, "https://buildkite.com/acme/app/builds/1", env["BUILDKITE_BUILD_URL"])
	assert.Equal(t, "build", env["BUILDKITE_STEP_KEY"])

	code, agent := call(t, srv, "POST", "/v3/register", "tok", js(map[string]any{"name": "a1"}))
	require.Equal(t, http.StatusOK, code)
	access := agent["access_token"].(string)
	code, acq := call(t, srv, "PUT", "/v3/jobs/j1/acquire", access, nil)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "a1", acq["env"].(map[string]any)["BUILDKITE_AGENT_NAME"])
	code, _ = call(t, srv, "PUT", "/v3/jobs/j1/acquire", access, nil)
	assert.Equal(t, http.StatusUnprocessableEntity, code, "acquired once")
	jobToken := acq["token"].(string)
	code, _ = call(t, srv, "PUT", "/v3/jobs/j1/start", access, js(map[string]any{"started_at": "now"}))
	require.Equal(t, http.StatusOK, code)

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte("hello\n"))
	require.NoError(t, zw.Close())
	code, _ = call(t, srv, "POST", "/v3/jobs/j1/chunks?sequence=1&offset=0&size=6", access, &gz)
	assert.Equal(t, http.StatusCreated, code)

	require.NoError(t, svc.Cancel("j1"))
	code, st := call(t, srv, "GET", "/v3/jobs/j1", jobToken, nil)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, StateCanceling, st["state"])
	code, states := call(t, srv, "POST", "/v3/stacks/s/jobs/get-states", "tok", js(map[string]any{"job_uuids": []string{"j1"}}))
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, map[string]any{"j1": StateCanceling}, states["states"])

	code, _ = call(t, srv, "PUT", "/v3/jobs/j1/finish", access, js(map[string]any{"exit_status": "-1", "signal": "SIGTERM", "signal_reason": "cancel"}))
	require.Equal(t, http.StatusOK, code)
	<-svc.Finished("j1")
	r := svc.Result("j1")
	assert.Equal(t, []string{StateScheduled, StateReserved, StateAccepted, StateRunning, StateCanceling, StateCanceled}, r.States)
	assert.Equal(t, "cancel", r.SignalReason)
	assert.Equal(t, "hello\n", r.Log)

	code, _ = call(t, srv, "POST", "/v3/agentedge.v1.AgentEdgeService/StreamPings", access, strings.NewReader(""))
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, []string{"POST /v3/agentedge.v1.AgentEdgeService/StreamPings"}, svc.Unknown())
}
