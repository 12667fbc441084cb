// Package gitlabapi is a stand-in for GitLab's runner API (the coordinator),
// enough for a real GitLab Runner to take plain `script:` jobs and report
// them: POST /api/v4/jobs/request hands out queued jobs, PUT
// /api/v4/jobs/:id takes the job's state, PATCH /api/v4/jobs/:id/trace
// takes its log. A cancel is answered the way GitLab answers it, with the
// Job-Status header on the runner's next update or trace patch.
package gitlabapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Job is a job to hand out: a script run in Image, under the service's
// Timeout (GitLab's job timeout, which the runner enforces).
type Job struct {
	ID      int64
	Name    string
	Image   string
	Script  []string
	Timeout time.Duration
	// Variables are the job's CI variables, after the suite's defaults
	// (GIT_STRATEGY none: the stand-in serves no repository).
	Variables map[string]string
}

// Result is what the runner reported about a job.
type Result struct {
	State         string // running, success, failed
	FailureReason string
	ExitCode      int
	Trace         string
	// Updates is every state the runner reported, in order.
	Updates []string
}

type job struct {
	spec     Job
	token    string
	taken    bool
	cancel   bool
	result   Result
	finished chan struct{}
}

// Coordinator serves the runner API on its ServeHTTP.
type Coordinator struct {
	mu     sync.Mutex
	queue  []int64
	jobs   map[int64]*job
	tokens map[string]int64
}

// New returns a coordinator with no jobs.
func New() *Coordinator {
	return &Coordinator{jobs: map[int64]*job{}, tokens: map[string]int64{}}
}

// Add queues j for the next runner that asks.
func (c *Coordinator) Add(j Job) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tok := fmt.Sprintf("job-token-%d", j.ID)
	c.jobs[j.ID] = &job{spec: j, token: tok, finished: make(chan struct{})}
	c.tokens[tok] = j.ID
	c.queue = append(c.queue, j.ID)
}

// Cancel marks job id cancelled: the runner is told on its next update.
func (c *Coordinator) Cancel(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if j := c.jobs[id]; j != nil {
		j.cancel = true
	}
}

// Taken reports whether a runner has taken job id.
func (c *Coordinator) Taken(id int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.jobs[id]
	return j != nil && j.taken
}

// Result is what the runner has reported about job id so far.
func (c *Coordinator) Result(id int64) Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.jobs[id]
	if j == nil {
		return Result{}
	}
	r := j.result
	r.Updates = append([]string(nil), r.Updates...)
	return r
}

// Wait waits until the runner reports job id finished (success or failed).
func (c *Coordinator) Wait(ctx context.Context, id int64) (Result, error) {
	c.mu.Lock()
	j := c.jobs[id]
	c.mu.Unlock()
	if j == nil {
		return Result{}, fmt.Errorf("no job %d", id)
	}
	select {
	case <-j.finished:
		return c.Result(id), nil
	case <-ctx.Done():
		return c.Result(id), fmt.Errorf("job %d not finished: %w", id, ctx.Err())
	}
}

// ServeHTTP routes the runner API.
func (c *Coordinator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/api/v4/")
	var id int64
	switch {
	case r.Method == http.MethodPost && path == "jobs/request":
		c.request(w, r)
	case r.Method == http.MethodPost && path == "runners/verify":
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"id":1,"token":"verified"}`))
	case r.Method == http.MethodPut && scan(path, "jobs/%d", &id):
		c.update(w, r, id)
	case r.Method == http.MethodPatch && scan(strings.TrimSuffix(path, "/trace"), "jobs/%d", &id) && strings.HasSuffix(path, "/trace"):
		c.trace(w, r, id)
	default:
		http.NotFound(w, r)
	}
}

func scan(path, format string, id *int64) bool {
	n, err := fmt.Sscanf(path, format, id)
	return err == nil && n == 1 && fmt.Sprintf(format, *id) == path
}
