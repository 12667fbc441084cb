package gitlabapi

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// request hands out the next queued job (201) or none (204), as GitLab
// does to POST /api/v4/jobs/request.
func (c *Coordinator) request(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	c.mu.Lock()
	var j *job
	if len(c.queue) > 0 {
		j = c.jobs[c.queue[0]]
		c.queue = c.queue[1:]
		j.taken = true
	}
	c.mu.Unlock()
	if j == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(payload(j.spec, j.token))
}

// updateRequest is the body of PUT /api/v4/jobs/:id.
type updateRequest struct {
	Token         string `json:"token"`
	State         string `json:"state"`
	FailureReason string `json:"failure_reason"`
	ExitCode      int    `json:"exit_code"`
}

// update takes the job's state, answering a cancelled job's with
// Job-Status: canceled, as GitLab does.
func (c *Coordinator) update(w http.ResponseWriter, r *http.Request, id int64) {
	var req updateRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.jobs[id]
	if j == nil || req.Token != j.token {
		http.Error(w, "403 Forbidden", http.StatusForbidden)
		return
	}
	res := &j.result
	res.Updates = append(res.Updates, req.State)
	finished := req.State == "success" || req.State == "failed"
	if res.State != "success" && res.State != "failed" {
		res.State, res.FailureReason, res.ExitCode = req.State, req.FailureReason, req.ExitCode
		if finished {
			close(j.finished)
		}
	}
	if j.cancel && !finished {
		w.Header().Set("Job-Status", "canceled")
	}
	w.WriteHeader(http.StatusOK)
}

// trace appends a log patch at its Content-Range and answers with the
// range held, as GitLab does to PATCH /api/v4/jobs/:id/trace.
func (c *Coordinator) trace(w http.ResponseWriter, r *http.Request, id int64) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.jobs[id]
	if j == nil || r.Header.Get("Job-Token") != j.token {
		http.Error(w, "403 Forbidden", http.StatusForbidden)
		return
	}
	start, _, _ := strings.Cut(r.Header.Get("Content-Range"), "-")
	if off, err := strconv.Atoi(start); err != nil || off != len(j.result.Trace) {
		w.Header().Set("Range", "0-"+strconv.Itoa(len(j.result.Trace)))
		w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
		return
	}
	j.result.Trace += string(body)
	if j.cancel {
		w.Header().Set("Job-Status", "canceled")
	} else {
		w.Header().Set("Job-Status", "running")
	}
	w.Header().Set("Range", "0-"+strconv.Itoa(len(j.result.Trace)))
	w.Header().Set("X-GitLab-Trace-Update-Interval", "1")
	w.WriteHeader(http.StatusAccepted)
}

// payload is the job as GitLab hands it to a runner.
func payload(j Job, token string) map[string]any {
	vars := []map[string]any{
		{"key": "GIT_STRATEGY", "value": "none", "public": true},
		{"key": "CI_JOB_ID", "value": strconv.FormatInt(j.ID, 10), "public": true},
		{"key": "CI_JOB_NAME", "value": j.Name, "public": true},
		{"key": "CI_JOB_URL", "value": jobURL(j.ID), "public": true},
		{"key": "CI_PROJECT_ID", "value": "7", "public": true},
	}
	for k, v := range j.Variables {
		vars = append(vars, map[string]any{"key": k, "value": v, "public": true})
	}
	timeout := int(j.Timeout.Seconds())
	return map[string]any{
		"id":              j.ID,
		"token":           token,
		"allow_git_fetch": false,
		"job_info": map[string]any{
			"name": j.Name, "stage": "test", "project_id": 7, "project_name": "fleet",
			"project_full_path": "runnerguard/fleet",
		},
		"git_info": map[string]any{
			"repo_url": "http://gitlab.invalid/runnerguard/fleet.git", "ref": "main",
			"sha": "0000000000000000000000000000000000000000", "ref_type": "branch",
		},
		"runner_info": map[string]any{"timeout": timeout},
		"variables":   vars,
		"steps": []map[string]any{{
			"name": "script", "script": j.Script, "timeout": timeout,
			"when": "on_success", "allow_failure": false,
		}},
		"image":        map[string]any{"name": j.Image},
		"services":     []any{},
		"artifacts":    []any{},
		"cache":        []any{},
		"credentials":  []any{},
		"dependencies": []any{},
		"features":     map[string]any{"trace_sections": true},
	}
}

// jobURL is the job's page, as the runner puts it on the build pod.
func jobURL(id int64) string {
	return "http://gitlab.invalid/runnerguard/fleet/-/jobs/" + strconv.FormatInt(id, 10)
}
