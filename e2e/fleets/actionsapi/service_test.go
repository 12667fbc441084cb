package actionsapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// client plays ARC's scale-set client and a runner over HTTP, in the
// shapes github.com/actions/scaleset sends.
type client struct {
	t     *testing.T
	base  string
	admin string
}

func newClient(t *testing.T) (*Service, *client) {
	t.Helper()
	s := New("rg-org", "pat", 200*time.Millisecond)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	s.SetBase(srv.URL)
	return s, &client{t: t, base: srv.URL}
}

func (c *client) do(method, path, auth string, body any) (int, []byte) {
	c.t.Helper()
	var in io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(c.t, err)
		in = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, in)
	require.NoError(c.t, err)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	return resp.StatusCode, out
}

// register walks the client's token refresh: registration token, then the
// service's URL and admin token.
func (c *client) register() {
	c.t.Helper()
	code, body := c.do("POST", "/api/v3/orgs/rg-org/actions/runners/registration-token", "Bearer pat", nil)
	require.Equal(c.t, http.StatusCreated, code, string(body))
	var rt struct{ Token string }
	require.NoError(c.t, json.Unmarshal(body, &rt))
	code, body = c.do("POST", "/api/v3/actions/runner-registration", "RemoteAuth "+rt.Token, map[string]string{"url": c.base + "/rg-org", "runner_event": "register"})
	require.Equal(c.t, http.StatusOK, code, string(body))
	var conn struct{ URL, Token string }
	require.NoError(c.t, json.Unmarshal(body, &conn))
	assert.Equal(c.t, c.base+"/service/", conn.URL)
	assert.Len(c.t, strings.Split(conn.Token, "."), 3, "the admin token is a JWT the client reads its expiry from")
	c.admin = "Bearer " + conn.Token
}

// message long-polls the queue for the message after last.
func (c *client) message(last int) (wireMessage, []wireJobMessage) {
	c.t.Helper()
	for range 20 {
		code, body := c.do("GET", "/queue/1?lastMessageId="+itoa(last), "Bearer "+queueToken, nil)
		if code == http.StatusAccepted {
			continue
		}
		require.Equal(c.t, http.StatusOK, code, string(body))
		var m wireMessage
		require.NoError(c.t, json.Unmarshal(body, &m))
		var jobs []wireJobMessage
		require.NoError(c.t, json.Unmarshal([]byte(m.Body), &jobs))
		return m, jobs
	}
	c.t.Fatal("no message came")
	return wireMessage{}, nil
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestAJobGoesFromTheQueueThroughARunnerAsARCsClientSeesIt(t *testing.T) {
	s, c := newClient(t)
	code, _ := c.do("POST", "/api/v3/orgs/rg-org/actions/runners/registration-token", "Bearer wrong", nil)
	assert.Equal(t, http.StatusUnauthorized, code, "a wrong token gets no registration token")
	c.register()
	set := s.CreateScaleSet("fleet")
	code, body := c.do("GET", "/service/_apis/runtime/runnerscalesets?runnerGroupId=1&name=fleet", c.admin, nil)
	require.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"count":1,"value":[{"id":1,"name":"fleet","runnerGroupId":1,"labels":[{"type":"System","name":"fleet"}]}]}`, string(body))
	code, body = c.do("POST", "/service/_apis/runtime/runnerscalesets/1/sessions", c.admin, map[string]string{"ownerName": "listener"})
	require.Equal(t, http.StatusOK, code, string(body))
	assert.Contains(t, string(body), `"messageQueueUrl":"`+c.base+`/queue/1"`)

	s.Queue(Job{RequestID: 7, ID: "job-7", Name: "build", Script: "echo hi", Linger: 3 * time.Second})
	m, jobs := c.message(0)
	require.Len(t, jobs, 1)
	assert.Equal(t, "JobAvailable", jobs[0].MessageType)
	assert.Equal(t, 1, m.Statistics.TotalAvailableJobs)
	code, body = c.do("POST", "/service/_apis/runtime/runnerscalesets/1/acquirejobs", "Bearer "+queueToken, []int64{7, 8})
	require.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"count":1,"value":[7]}`, string(body), "only the available job is acquired")
	m, jobs = c.message(m.MessageID)
	assert.Equal(t, "JobAssigned", jobs[0].MessageType)
	assert.Equal(t, 1, m.Statistics.TotalAssignedJobs, "the listener scales to the assigned jobs")

	code, body = c.do("POST", "/service/_apis/runtime/runnerscalesets/"+itoa(set)+"/generatejitconfig", c.admin, wireJitSetting{Name: "fleet-runner-x"})
	require.Equal(t, http.StatusOK, code, string(body))
	var jit wireJitConfig
	require.NoError(t, json.Unmarshal(body, &jit))
	code, body = c.do("GET", "/runner/job?jit="+jit.EncodedJITConfig, "", nil)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "echo hi\n", string(body), "the runner gets the job's script")
	m, jobs = c.message(m.MessageID)
	assert.Equal(t, "JobStarted", jobs[0].MessageType)
	assert.Equal(t, "fleet-runner-x", jobs[0].RunnerName, "the listener writes the job into this runner's EphemeralRunner")
	assert.Equal(t, int64(7), jobs[0].RunnerRequestID)

	remove := "/service/_apis/distributedtask/pools/0/agents/" + itoa(jit.Runner.ID)
	code, body = c.do("DELETE", remove, c.admin, nil)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, string(body), "JobStillRunningException", "a busy runner is not removed")
	assert.Equal(t, 1, s.Refused())

	code, body = c.do("POST", "/runner/done?jit="+jit.EncodedJITConfig+"&rc=0", "", nil)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "3", string(body), "the runner lingers as long as the job says")
	_, jobs = c.message(m.MessageID)
	assert.Equal(t, "JobCompleted", jobs[0].MessageType)
	assert.Equal(t, "succeeded", jobs[0].Result)

	code, _ = c.do("DELETE", remove, c.admin, nil)
	assert.Equal(t, http.StatusNoContent, code, "the job over, the runner is removed")
	code, _ = c.do("DELETE", remove, c.admin, nil)
	assert.Equal(t, http.StatusNoContent, code, "removing it again succeeds, as ARC's finalizer does")
	code, body = c.do("GET", remove, c.admin, nil)
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, string(body), "AgentNotFoundException")
}

func TestAHeldJobGoesToNoRunnerAndACancelCompletesIt(t *testing.T) {
	s, c := newClient(t)
	c.register()
	s.CreateScaleSet("fleet")
	s.Queue(Job{RequestID: 9, ID: "job-9", Script: "true", Hold: true})
	code, _ := c.do("POST", "/service/_apis/runtime/runnerscalesets/1/acquirejobs", "Bearer "+queueToken, []int64{9})
	require.Equal(t, http.StatusOK, code)
	code, body := c.do("POST", "/service/_apis/runtime/runnerscalesets/1/generatejitconfig", c.admin, wireJitSetting{Name: "idle"})
	require.Equal(t, http.StatusOK, code)
	var jit wireJitConfig
	require.NoError(t, json.Unmarshal(body, &jit))
	code, body = c.do("GET", "/runner/job?jit="+jit.EncodedJITConfig, "", nil)
	assert.Equal(t, http.StatusOK, code)
	assert.Empty(t, body, "the held job is given to no runner")
	require.NoError(t, s.Cancel(9))
	state, result := s.Result(9)
	assert.Equal(t, "completed", state)
	assert.Equal(t, "canceled", result)
	assert.Error(t, s.Cancel(9), "a completed job cannot be cancelled")
	code, _ = c.do("DELETE", "/service/_apis/distributedtask/pools/0/agents/"+itoa(jit.Runner.ID), c.admin, nil)
	assert.Equal(t, http.StatusNoContent, code, "an idle runner is removed")
	assert.Equal(t, 0, s.Registered())
}

func TestTheServiceRefusesCallsWithoutItsTokens(t *testing.T) {
	_, c := newClient(t)
	c.register()
	for _, tc := range []struct{ name, method, path, auth string }{
		{"the queue without its token", "GET", "/queue/1", c.admin},
		{"acquiring jobs with the admin token", "POST", "/service/_apis/runtime/runnerscalesets/1/acquirejobs", c.admin},
		{"the service with the queue's token", "GET", "/service/_apis/runtime/runnerscalesets/1", "Bearer " + queueToken},
		{"registration with a wrong token", "POST", "/api/v3/actions/runner-registration", "RemoteAuth nope"},
		{"a runner's job with an unknown JIT config", "GET", "/runner/job?jit=nope", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _ := c.do(tc.method, tc.path, tc.auth, nil)
			assert.Equal(t, http.StatusUnauthorized, code)
		})
	}
}

func TestARunnerLostFailsItsJobAndThenMayBeRemoved(t *testing.T) {
	s, c := newClient(t)
	c.register()
	s.CreateScaleSet("fleet")
	s.Queue(Job{RequestID: 5, ID: "job-5", Script: "dd"})
	_, _ = c.do("POST", "/service/_apis/runtime/runnerscalesets/1/acquirejobs", "Bearer "+queueToken, []int64{5})
	_, body := c.do("POST", "/service/_apis/runtime/runnerscalesets/1/generatejitconfig", c.admin, wireJitSetting{Name: "oom"})
	var jit wireJitConfig
	require.NoError(t, json.Unmarshal(body, &jit))
	assert.Error(t, s.RunnerLost("oom"), "a runner with no job is not lost")
	_, _ = c.do("GET", "/runner/job?jit="+jit.EncodedJITConfig, "", nil)
	assert.Equal(t, "oom", s.RunnerOf(5))
	remove := "/service/_apis/distributedtask/pools/0/agents/" + itoa(jit.Runner.ID)
	code, _ := c.do("DELETE", remove, c.admin, nil)
	assert.Equal(t, http.StatusBadRequest, code, "refused while the job runs")
	require.NoError(t, s.RunnerLost("oom"))
	state, result := s.Result(5)
	assert.Equal(t, "completed/failed", state+"/"+result)
	code, _ = c.do("DELETE", remove, c.admin, nil)
	assert.Equal(t, http.StatusNoContent, code, "GitHub lets a lost runner go once it failed the job")
}
