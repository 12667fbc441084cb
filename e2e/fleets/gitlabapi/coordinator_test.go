package gitlabapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func call(t *testing.T, srv *httptest.Server, method, path, body string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := srv.Client().Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = res.Body.Close() })
	return res
}

func TestAJobIsHandedOutOnceAndItsTraceAndStateAreKept(t *testing.T) {
	c := New()
	srv := httptest.NewServer(c)
	defer srv.Close()
	c.Add(Job{ID: 5, Name: "build", Image: "busybox", Script: []string{"echo hi"}, Timeout: time.Minute})

	res := call(t, srv, http.MethodPost, "/api/v4/jobs/request", `{"token":"glrt-x"}`, nil)
	require.Equal(t, http.StatusCreated, res.StatusCode)
	var got map[string]any
	require.NoError(t, json.NewDecoder(res.Body).Decode(&got))
	assert.EqualValues(t, 5, got["id"])
	assert.EqualValues(t, 60, got["runner_info"].(map[string]any)["timeout"])
	assert.True(t, c.Taken(5))
	assert.Equal(t, http.StatusNoContent, call(t, srv, http.MethodPost, "/api/v4/jobs/request", `{}`, nil).StatusCode, "handed out once")

	tok := map[string]string{"Job-Token": got["token"].(string), "Content-Range": "0-2"}
	res = call(t, srv, http.MethodPatch, "/api/v4/jobs/5/trace", "hi\n", tok)
	assert.Equal(t, http.StatusAccepted, res.StatusCode)
	assert.Equal(t, "0-3", res.Header.Get("Range"))
	tok["Content-Range"] = "1-2"
	assert.Equal(t, http.StatusRequestedRangeNotSatisfiable, call(t, srv, http.MethodPatch, "/api/v4/jobs/5/trace", "i\n", tok).StatusCode, "a patch at the wrong offset")
	assert.Equal(t, http.StatusForbidden, call(t, srv, http.MethodPatch, "/api/v4/jobs/5/trace", "x", map[string]string{"Job-Token": "other"}).StatusCode)

	body := `{"token":"` + got["token"].(string) + `","state":"success","exit_code":0}`
	assert.Equal(t, http.StatusOK, call(t, srv, http.MethodPut, "/api/v4/jobs/5", body, nil).StatusCode)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r, err := c.Wait(ctx, 5)
	require.NoError(t, err)
	assert.Equal(t, "success", r.State)
	assert.Equal(t, "hi\n", r.Trace)
}

func TestACancelledJobIsToldSoOnItsNextUpdate(t *testing.T) {
	c := New()
	srv := httptest.NewServer(c)
	defer srv.Close()
	c.Add(Job{ID: 6, Script: []string{"sleep 60"}})
	call(t, srv, http.MethodPost, "/api/v4/jobs/request", `{}`, nil)
	tok := map[string]string{"Job-Token": "job-token-6", "Content-Range": "0-0"}

	assert.Equal(t, "running", call(t, srv, http.MethodPatch, "/api/v4/jobs/6/trace", "a", tok).Header.Get("Job-Status"))
	c.Cancel(6)
	tok["Content-Range"] = "1-1"
	assert.Equal(t, "canceled", call(t, srv, http.MethodPatch, "/api/v4/jobs/6/trace", "b", tok).Header.Get("Job-Status"))
	res := call(t, srv, http.MethodPut, "/api/v4/jobs/6", `{"token":"job-token-6","state":"running"}`, nil)
	assert.Equal(t, "canceled", res.Header.Get("Job-Status"))
}
