// Package buildkiteapi is a stand-in for Buildkite's Agent API, the two
// parts of it that a real agent-stack-k8s and a real buildkite-agent call,
// held to the shapes their clients send and read:
//
//   - the Stacks API (github.com/buildkite/stacksapi, which the stack's
//     api/agent_client.go uses): POST /stacks/register, GET
//     /stacks/:key/scheduled-jobs?queue_key=, PUT
//     /stacks/:key/scheduled-jobs/batch-reserve, GET /stacks/:key/jobs/:id,
//     POST /stacks/:key/jobs/get-states, POST /stacks/:key/jobs/:id/finish,
//     POST /stacks/:key/notifications, POST /stacks/:key/deregister;
//   - the agent's API (github.com/buildkite/agent/v3/api): POST /register,
//     /connect, /disconnect, /heartbeat, GET /ping, GET /token (the token's
//     identity, which the stack reads too), PUT /jobs/:id/acquire,
//     /start, /finish, POST /jobs/:id/chunks (gzip log chunks) and
//     /header_times, GET /jobs/:id (the job's state, which the agent polls
//     to learn of a cancel).
//
// Jobs are offered to the stack's queue as scheduled; a reservation, the
// agent's acquire, start and finish move them on as Buildkite does. Cancel
// marks a running job canceling: the agent's next state poll sees it and
// the agent ends the job, which it then finishes (canceled).
package buildkiteapi

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The states a job goes through here (the stack's api/job_states.go).
const (
	StateScheduled = "scheduled"
	StateReserved  = "reserved"
	StateAccepted  = "accepted"
	StateRunning   = "running"
	StateCanceling = "canceling"
	StateCanceled  = "canceled"
	StateFinished  = "finished"
)

// Job is a job to offer: a command step of pipeline Pipeline, with key
// StepKey, run by the stack's queue. Plugins is the job's BUILDKITE_PLUGINS
// (JSON), where the kubernetes plugin's podSpec goes.
type Job struct {
	ID       string
	Pipeline string
	StepKey  string
	Label    string
	Command  string
	Plugins  string
}

// Result is what the stack and the agent reported about a job.
type Result struct {
	State string
	// ExitStatus, Signal and SignalReason are the agent's finish (or the
	// stack's, when it failed the job: exit status -1 and Detail).
	ExitStatus   string
	Signal       string
	SignalReason string
	Detail       string
	Log          string
	// Notifications are the stack's notes on the job.
	Notifications []string
	// States is every state the job went through, in order.
	States []string
}

type job struct {
	spec     Job
	agent    string // the name of the agent that acquired it
	host     string // and the host it registered from
	token    string
	result   Result
	finished chan struct{}
}

// Service serves both APIs on its Handler.
type Service struct {
	mu      sync.Mutex
	base    string
	org     string
	regTok  string
	queue   string
	order   []string
	jobs    map[string]*job
	tokens  map[string]string // a job's access token: its ID
	agents  map[string]string // an agent's access token: its name
	hosts   map[string]string // an agent's access token: its host
	unknown []string
	nAgents int
}

// New returns a service for organization org whose agents register with
// token (the stack reads the same token from its Secret) and whose stack
// polls queue.
func New(org, token, queue string) *Service {
	return &Service{org: org, regTok: token, queue: queue, jobs: map[string]*job{},
		tokens: map[string]string{}, agents: map[string]string{}, hosts: map[string]string{}}
}

// SetBase sets the URL the service is reached at (the agents' endpoint).
func (s *Service) SetBase(base string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.base = strings.TrimSuffix(base, "/")
}

// BuildURL is the build page of pipeline's build, as BUILDKITE_BUILD_URL.
func (s *Service) BuildURL(pipeline string) string {
	return fmt.Sprintf("https://buildkite.com/%s/%s/builds/1", s.org, pipeline)
}

// Add offers j to the stack's queue.
func (s *Service) Add(j Job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobs[j.ID] = &job{spec: j, token: "job-" + j.ID, finished: make(chan struct{}),
		result: Result{State: StateScheduled, States: []string{StateScheduled}}}
	s.tokens["job-"+j.ID] = j.ID
	s.order = append(s.order, j.ID)
}

// AgentHost is the host name the agent that acquired job id registered
// with ("" before one did): what Buildkite's REST API shows as the job's
// agent's hostname.
func (s *Service) AgentHost(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j, ok := s.jobs[id]; ok {
		return j.host
	}
	return ""
}

// Cancel cancels job id as a user does in Buildkite: a running job is
// canceling until its agent finishes it; one not yet running is canceled.
func (s *Service) Cancel(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return fmt.Errorf("no job %s", id)
	}
	switch j.result.State {
	case StateAccepted, StateRunning:
		j.set(StateCanceling)
	case StateScheduled, StateReserved:
		j.set(StateCanceled)
		close(j.finished)
	default:
		return fmt.Errorf("job %s is %s", id, j.result.State)
	}
	return nil
}

// Finished is closed when job id is finished or canceled.
func (s *Service) Finished(id string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jobs[id].finished
}

// State is job id's state now.
func (s *Service) State(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jobs[id].result.State
}

// Result is what was reported about job id so far.
func (s *Service) Result(id string) Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.jobs[id].result
	r.States = append([]string(nil), r.States...)
	r.Notifications = append([]string(nil), r.Notifications...)
	return r
}

// Unknown is the requests the service had no answer for.
func (s *Service) Unknown() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.unknown...)
}

func (j *job) set(state string) {
	j.result.State = state
	j.result.States = append(j.result.States, state)
}

// env is the job's environment as Buildkite sends it to the stack and the
// agent.
func (s *Service) env(j *job) map[string]string {
	e := map[string]string{
		"BUILDKITE":                         "true",
		"CI":                                "true",
		"BUILDKITE_JOB_ID":                  j.spec.ID,
		"BUILDKITE_BUILD_ID":                "0190a3c4-0000-4000-8000-" + fmt.Sprintf("%012x", len(j.spec.Pipeline)),
		"BUILDKITE_BUILD_NUMBER":            "1",
		"BUILDKITE_BUILD_URL":               s.BuildURL(j.spec.Pipeline),
		"BUILDKITE_ORGANIZATION_SLUG":       s.org,
		"BUILDKITE_PIPELINE_SLUG":           j.spec.Pipeline,
		"BUILDKITE_PIPELINE_NAME":           j.spec.Pipeline,
		"BUILDKITE_PIPELINE_PROVIDER":       "github",
		"BUILDKITE_PIPELINE_DEFAULT_BRANCH": "main",
		"BUILDKITE_STEP_KEY":                j.spec.StepKey,
		"BUILDKITE_STEP_ID":                 "step-" + j.spec.ID,
		"BUILDKITE_LABEL":                   j.spec.Label,
		"BUILDKITE_COMMAND":                 j.spec.Command,
		"BUILDKITE_SCRIPT_PATH":             j.spec.Command,
		// The pipeline's repository; its steps skip the checkout
		// (skip_checkout: true), as the stand-in serves no repository.
		"BUILDKITE_REPO":                  "https://github.com/" + s.org + "/" + j.spec.Pipeline + ".git",
		"BUILDKITE_SKIP_CHECKOUT":         "true",
		"BUILDKITE_BRANCH":                "main",
		"BUILDKITE_COMMIT":                "HEAD",
		"BUILDKITE_MESSAGE":               "runnerguard fleets",
		"BUILDKITE_SOURCE":                "api",
		"BUILDKITE_BUILD_CREATOR":         "runnerguard",
		"BUILDKITE_RETRY_COUNT":           "0",
		"BUILDKITE_TIMEOUT":               "false",
		"BUILDKITE_AGENT_META_DATA_QUEUE": s.queue,
	}
	if j.agent != "" {
		e["BUILDKITE_AGENT_NAME"] = j.agent
	}
	if j.spec.Plugins != "" {
		e["BUILDKITE_PLUGINS"] = j.spec.Plugins
	}
	return e
}

// Handler serves the APIs under any prefix ending in the paths above
// (the agent's endpoint is http://host:port/v3).
func (s *Service) Handler() http.Handler {
	return http.HandlerFunc(s.serve)
}

type apiError struct {
	Message string `json:"message"`
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func decode(r *http.Request, v any) error {
	if r.Body == nil {
		return nil
	}
	b, err := io.ReadAll(r.Body)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return err
	}
	return json.Unmarshal(b, v)
}

func (s *Service) serve(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/v3")
	parts := strings.Split(strings.Trim(path, "/"), "/")
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Token ")
	s.mu.Lock()
	defer s.mu.Unlock()
	var handled bool
	switch {
	case len(parts) >= 1 && parts[0] == "stacks":
		handled = s.stacks(w, r, token, parts[1:])
	case len(parts) >= 2 && parts[0] == "jobs":
		handled = s.jobAPI(w, r, token, parts[1], parts[2:])
	case len(parts) == 1:
		handled = s.agentAPI(w, r, token, parts[0])
	}
	if !handled {
		s.unknown = append(s.unknown, r.Method+" "+r.URL.Path)
		log.Printf("buildkiteapi: no answer for %s %s", r.Method, r.URL.String())
		reply(w, http.StatusNotFound, apiError{"No route matches " + r.Method + " " + r.URL.Path})
	}
}

// stacks is the Stacks API, called with the agent token.
func (s *Service) stacks(w http.ResponseWriter, r *http.Request, token string, p []string) bool {
	if token != s.regTok {
		reply(w, http.StatusUnauthorized, apiError{"Invalid agent token"})
		return true
	}
	if len(p) == 1 && p[0] == "register" && r.Method == http.MethodPost {
		var req struct {
			Key      string            `json:"key"`
			Type     string            `json:"type"`
			QueueKey string            `json:"queue_key"`
			Metadata map[string]string `json:"metadata"`
		}
		if err := decode(r, &req); err != nil || req.Key == "" || req.QueueKey == "" {
			reply(w, http.StatusUnprocessableEntity, apiError{fmt.Sprintf("key and queue_key are required (%v)", err)})
			return true
		}
		if req.QueueKey != s.queue {
			reply(w, http.StatusNotFound, apiError{"No queue " + req.QueueKey})
			return true
		}
		now := time.Now().UTC()
		reply(w, http.StatusOK, map[string]any{
			"id": "01940000-0000-4000-8000-000000000001", "organization_uuid": "01940000-0000-4000-8000-000000000000",
			"cluster_queue_key": req.QueueKey, "key": req.Key, "type": req.Type, "metadata": req.Metadata,
			"last_connected_on": now, "state": "connected",
		})
		return true
	}
	if len(p) < 2 {
		return false
	}
	rest := p[1:]
	switch {
	case len(rest) == 1 && rest[0] == "deregister" && r.Method == http.MethodPost:
		reply(w, http.StatusOK, struct{}{})
	case len(rest) == 1 && rest[0] == "scheduled-jobs" && r.Method == http.MethodGet:
		if q := r.URL.Query().Get("queue_key"); q != s.queue {
			reply(w, http.StatusNotFound, apiError{"No queue " + q})
			return true
		}
		jobs := []map[string]any{}
		for _, id := range s.order {
			j := s.jobs[id]
			if j.result.State != StateScheduled {
				continue
			}
			jobs = append(jobs, map[string]any{
				"id": id, "priority": 0, "agent_query_rules": []string{"queue=" + s.queue},
				"scheduled_at": time.Now().UTC(),
				"pipeline":     map[string]any{"slug": j.spec.Pipeline, "uuid": "pipeline-" + j.spec.Pipeline},
				"build":        map[string]any{"uuid": "build-" + id, "number": 1, "branch": "main"},
				"step":         map[string]any{"key": j.spec.StepKey},
			})
		}
		reply(w, http.StatusOK, map[string]any{
			"jobs":          jobs,
			"cluster_queue": map[string]any{"id": "queue-" + s.queue, "paused": false},
			"page_info":     map[string]any{"has_next_page": false, "end_cursor": ""},
		})
	case len(rest) == 2 && rest[0] == "scheduled-jobs" && rest[1] == "batch-reserve" && r.Method == http.MethodPut:
		var req struct {
			JobUUIDs []string `json:"job_uuids"`
		}
		if err := decode(r, &req); err != nil {
			reply(w, http.StatusBadRequest, apiError{err.Error()})
			return true
		}
		resp := map[string][]string{"reserved": {}, "not_reserved": {}}
		for _, id := range req.JobUUIDs {
			if j, ok := s.jobs[id]; ok && j.result.State == StateScheduled {
				j.set(StateReserved)
				resp["reserved"] = append(resp["reserved"], id)
			} else {
				resp["not_reserved"] = append(resp["not_reserved"], id)
			}
		}
		reply(w, http.StatusOK, resp)
	case len(rest) == 2 && rest[0] == "jobs" && rest[1] == "get-states" && r.Method == http.MethodPost:
		var req struct {
			JobUUIDs []string `json:"job_uuids"`
		}
		if err := decode(r, &req); err != nil {
			reply(w, http.StatusBadRequest, apiError{err.Error()})
			return true
		}
		states := map[string]string{}
		for _, id := range req.JobUUIDs {
			if j, ok := s.jobs[id]; ok {
				states[id] = j.result.State
			}
		}
		reply(w, http.StatusOK, map[string]any{"states": states})
	case len(rest) == 2 && rest[0] == "jobs" && r.Method == http.MethodGet:
		j, ok := s.jobs[rest[1]]
		if !ok {
			reply(w, http.StatusNotFound, apiError{"No job " + rest[1]})
			return true
		}
		reply(w, http.StatusOK, map[string]any{"id": j.spec.ID, "env": s.env(j), "command": j.spec.Command})
	case len(rest) == 3 && rest[0] == "jobs" && rest[2] == "finish" && r.Method == http.MethodPost:
		j, ok := s.jobs[rest[1]]
		if !ok {
			reply(w, http.StatusNotFound, apiError{"No job " + rest[1]})
			return true
		}
		var req struct {
			ExitStatus int    `json:"exit_status"`
			Detail     string `json:"detail"`
		}
		if err := decode(r, &req); err != nil {
			reply(w, http.StatusBadRequest, apiError{err.Error()})
			return true
		}
		if j.result.State == StateFinished || j.result.State == StateCanceled {
			reply(w, http.StatusUnprocessableEntity, apiError{"Job is already " + j.result.State})
			return true
		}
		j.result.ExitStatus, j.result.Detail = fmt.Sprint(req.ExitStatus), req.Detail
		j.set(StateFinished)
		close(j.finished)
		reply(w, http.StatusOK, struct{}{})
	case len(rest) == 1 && rest[0] == "notifications" && r.Method == http.MethodPost:
		var req struct {
			Notifications []struct {
				JobUUID string `json:"job_uuid"`
				Detail  string `json:"detail"`
			} `json:"notifications"`
		}
		if err := decode(r, &req); err != nil {
			reply(w, http.StatusBadRequest, apiError{err.Error()})
			return true
		}
		for _, n := range req.Notifications {
			if j, ok := s.jobs[n.JobUUID]; ok {
				j.result.Notifications = append(j.result.Notifications, n.Detail)
			}
		}
		reply(w, http.StatusOK, map[string]any{"errors": []any{}})
	default:
		return false
	}
	return true
}

// agentAPI is the agent's own calls: register with the agent token, the
// rest with the access token register gave.
func (s *Service) agentAPI(w http.ResponseWriter, r *http.Request, token, call string) bool {
	if call == "register" && r.Method == http.MethodPost {
		if token != s.regTok {
			reply(w, http.StatusUnauthorized, apiError{"Invalid agent registration token"})
			return true
		}
		var req struct {
			Name     string   `json:"name"`
			Hostname string   `json:"hostname"`
			Tags     []string `json:"meta_data"`
		}
		if err := decode(r, &req); err != nil {
			reply(w, http.StatusBadRequest, apiError{err.Error()})
			return true
		}
		s.nAgents++
		if req.Name == "" {
			// An agent started without a name (the stack's are) is named
			// by Buildkite: its host's name and a number.
			req.Name = fmt.Sprintf("%s-%d", req.Hostname, s.nAgents)
		}
		access := fmt.Sprintf("agent-access-%d", s.nAgents)
		s.agents[access] = req.Name
		s.hosts[access] = req.Hostname
		reply(w, http.StatusOK, map[string]any{
			"id": fmt.Sprintf("01940000-0000-4000-9000-%012d", s.nAgents), "name": req.Name,
			"access_token": access, "endpoint": s.base + "/v3", "request_headers": map[string]string{},
			"ping_interval": 2, "job_status_interval": 1, "heartbeat_interval": 60, "meta_data": req.Tags,
		})
		return true
	}
	if call == "token" && r.Method == http.MethodGet {
		// The token's identity (the stack reads it at start and wants a
		// cluster's token).
		if token != s.regTok {
			reply(w, http.StatusUnauthorized, apiError{"Invalid agent registration token"})
			return true
		}
		reply(w, http.StatusOK, map[string]any{
			"uuid": "01940000-0000-4000-a000-000000000001", "description": "runnerguard fleets", "token_type": "cluster",
			"organization_slug": s.org, "organization_uuid": "01940000-0000-4000-8000-000000000000",
			"cluster_uuid": "01940000-0000-4000-b000-000000000001", "cluster_name": "runnerguard",
			"organization_queue_uuid": "01940000-0000-4000-c000-000000000001", "organization_queue_key": s.queue,
		})
		return true
	}
	if _, ok := s.agents[token]; !ok {
		reply(w, http.StatusUnauthorized, apiError{"Invalid access token"})
		return true
	}
	switch {
	case call == "connect" && r.Method == http.MethodPost,
		call == "disconnect" && r.Method == http.MethodPost:
		reply(w, http.StatusOK, map[string]any{})
	case call == "heartbeat" && r.Method == http.MethodPost:
		var hb map[string]any
		_ = decode(r, &hb)
		reply(w, http.StatusOK, map[string]any{"sent_at": hb["sent_at"], "received_at": time.Now().UTC().Format(time.RFC3339)})
	case call == "ping" && r.Method == http.MethodGet:
		reply(w, http.StatusOK, map[string]any{})
	default:
		return false
	}
	return true
}

// jobAPI is the calls on one job: acquire with the agent's access token,
// the rest with it or the job's own token (the bootstrap's).
func (s *Service) jobAPI(w http.ResponseWriter, r *http.Request, token, id string, p []string) bool {
	_, agent := s.agents[token]
	if !agent && s.tokens[token] != id {
		reply(w, http.StatusUnauthorized, apiError{"Invalid access token"})
		return true
	}
	j, ok := s.jobs[id]
	if !ok {
		reply(w, http.StatusNotFound, apiError{"No job " + id})
		return true
	}
	call := strings.Join(p, "/")
	switch {
	case call == "" && r.Method == http.MethodGet:
		reply(w, http.StatusOK, map[string]any{"state": j.result.State})
	case call == "acquire" && r.Method == http.MethodPut:
		if j.result.State != StateReserved && j.result.State != StateScheduled {
			reply(w, http.StatusUnprocessableEntity, apiError{"Job is " + j.result.State + " and can't be acquired"})
			return true
		}
		j.agent, j.host = s.agents[token], s.hosts[token]
		j.set(StateAccepted)
		reply(w, http.StatusOK, map[string]any{
			"id": id, "endpoint": s.base + "/v3", "state": j.result.State, "env": s.env(j),
			"step":                    map[string]any{"command": j.spec.Command, "key": j.spec.StepKey},
			"chunks_max_size_bytes":   102400,
			"chunks_interval_seconds": 1,
			"log_max_size_bytes":      1 << 20,
			"token":                   j.token,
			"runnable_at":             time.Now().UTC().Format(time.RFC3339),
		})
	case call == "start" && r.Method == http.MethodPut:
		if j.result.State == StateAccepted {
			j.set(StateRunning)
		}
		reply(w, http.StatusOK, map[string]any{"state": j.result.State})
	case call == "finish" && r.Method == http.MethodPut:
		var req struct {
			ExitStatus   string `json:"exit_status"`
			Signal       string `json:"signal"`
			SignalReason string `json:"signal_reason"`
		}
		if err := decode(r, &req); err != nil {
			reply(w, http.StatusBadRequest, apiError{err.Error()})
			return true
		}
		if j.result.State == StateFinished || j.result.State == StateCanceled {
			reply(w, http.StatusUnprocessableEntity, apiError{"Job is already " + j.result.State})
			return true
		}
		j.result.ExitStatus, j.result.Signal, j.result.SignalReason = req.ExitStatus, req.Signal, req.SignalReason
		if j.result.State == StateCanceling {
			j.set(StateCanceled)
		} else {
			j.set(StateFinished)
		}
		close(j.finished)
		reply(w, http.StatusOK, map[string]any{"state": j.result.State})
	case call == "chunks" && r.Method == http.MethodPost:
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			reply(w, http.StatusBadRequest, apiError{err.Error()})
			return true
		}
		b, err := io.ReadAll(zr)
		if err != nil {
			reply(w, http.StatusBadRequest, apiError{err.Error()})
			return true
		}
		j.result.Log += string(b)
		reply(w, http.StatusCreated, map[string]any{})
	case call == "header_times" && r.Method == http.MethodPost:
		reply(w, http.StatusOK, map[string]any{})
	default:
		return false
	}
	return true
}
