package notifytest

import (
	"cmp"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"
)

// Status is a commit status as GitLab's "Set the pipeline status of a
// commit" takes it.
type Status struct {
	Project     string `json:"-"`
	SHA         string `json:"-"`
	State       string `json:"state"`
	Name        string `json:"name"`
	Ref         string `json:"ref"`
	TargetURL   string `json:"target_url"`
	Description string `json:"description"`
	PipelineID  int64  `json:"pipeline_id"`
}

// Job is a job the fake GitLab knows: its project (id), commit, pipeline,
// and its status ("running" when empty) with when it finished.
type Job struct {
	Project, ID, SHA, Ref string
	Pipeline              int64
	Status                string
	FinishedAt            time.Time
}

// GitLab is a GitLab instance's REST API (/api/v4) with one token.
type GitLab struct {
	*httptest.Server
	Token string
	Jobs  []Job

	service
	statuses []Status
	// received is every status accepted, in order: a running one GitLab
	// then moved on to its end is still among them.
	received []Status
}

// NewGitLab starts the fake, on loopback.
func NewGitLab(token string, jobs ...Job) *GitLab { return NewGitLabOn(nil, token, jobs...) }

// NewGitLabOn starts the fake on l (nil: loopback), e.g. an address the
// cluster's pods reach.
func NewGitLabOn(l net.Listener, token string, jobs ...Job) *GitLab {
	g := &GitLab{Token: token, Jobs: jobs}
	g.Server = serveOn(l, http.HandlerFunc(g.serve))
	return g
}

// AddJob makes a job known while the fake serves (a real fleet's jobs are
// numbered as they come).
func (g *GitLab) AddJob(j Job) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.Jobs = append(g.Jobs, j)
}

// SetJob sets the status of a job the fake knows (a real job's goes on
// while it serves), and when it finished.
func (g *GitLab) SetJob(project, id, status string, finished time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range g.Jobs {
		if g.Jobs[i].Project == project && g.Jobs[i].ID == id {
			g.Jobs[i].Status, g.Jobs[i].FinishedAt = status, finished
		}
	}
}

// Received is every status the fake accepted, in order, each as it came.
func (g *GitLab) Received() []Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Status(nil), g.received...)
}

// Statuses are the statuses set, a running or pending one as updated
// since.
func (g *GitLab) Statuses() []Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Status(nil), g.statuses...)
}

func (g *GitLab) bad(w http.ResponseWriter, format string, a ...any) {
	g.broke(format, a...)
	http.Error(w, `{"message":"400 Bad request"}`, http.StatusBadRequest)
}

func (g *GitLab) serve(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.begin(w, r) {
		return
	}
	if r.Header.Get("PRIVATE-TOKEN") != g.Token {
		http.Error(w, `{"message":"401 Unauthorized"}`, http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	// The project id is one path segment: a path is URL-encoded.
	path, ok := strings.CutPrefix(r.URL.EscapedPath(), "/api/v4/projects/")
	parts := strings.Split(path, "/")
	if !ok || len(parts) < 3 {
		g.bad(w, "%s %s: no such endpoint", r.Method, r.URL.Path)
		return
	}
	project, _ := url.PathUnescape(parts[0])
	switch {
	case len(parts) == 3 && parts[1] == "jobs" && r.Method == http.MethodGet:
		for _, j := range g.Jobs {
			if j.Project == project && j.ID == parts[2] {
				job := map[string]any{"id": json.Number(j.ID), "ref": j.Ref, "status": cmp.Or(j.Status, "running"),
					"web_url": g.Server.URL + "/" + j.Project + "/-/jobs/" + j.ID,
					"commit":  map[string]any{"id": j.SHA}, "pipeline": map[string]any{"id": j.Pipeline, "sha": j.SHA, "ref": j.Ref}}
				if !j.FinishedAt.IsZero() {
					job["finished_at"] = j.FinishedAt.UTC().Format(time.RFC3339Nano)
				}
				_ = json.NewEncoder(w).Encode(job)
				return
			}
		}
		http.Error(w, `{"message":"404 Not found"}`, http.StatusNotFound)
	case len(parts) == 3 && parts[1] == "statuses" && r.Method == http.MethodPost:
		g.set(w, r, project, parts[2])
	case len(parts) == 5 && parts[1] == "repository" && parts[2] == "commits" && parts[4] == "statuses" && r.Method == http.MethodGet:
		var out []map[string]any
		for _, s := range g.statuses {
			if s.Project == project && s.SHA == parts[3] && (r.URL.Query().Get("name") == "" || r.URL.Query().Get("name") == s.Name) {
				out = append(out, map[string]any{"name": s.Name, "status": s.State, "sha": s.SHA, "target_url": s.TargetURL, "description": s.Description})
			}
		}
		_ = json.NewEncoder(w).Encode(out)
	default:
		g.bad(w, "%s %s: no such endpoint", r.Method, r.URL.Path)
	}
}

func (g *GitLab) set(w http.ResponseWriter, r *http.Request, project, sha string) {
	var s Status
	if err := json.NewDecoder(r.Body).Decode(&s); err != nil {
		g.bad(w, "statuses: %v", err)
		return
	}
	states := []string{"pending", "running", "success", "failed", "canceled", "skipped"}
	switch {
	case !contains(states, s.State):
		g.bad(w, "statuses: state %q is none of %v", s.State, states)
	case len([]rune(s.Description)) > 255:
		g.bad(w, "statuses: description longer than 255 characters")
	case len(sha) != 40:
		g.bad(w, "statuses: sha %q", sha)
	default:
		s.Project, s.SHA = project, sha
		// GitLab updates the pipeline's running or pending status of the
		// name in place, through its state machine; any other, it adds.
		n := 0
		for i, o := range g.statuses {
			if o.Project == project && o.SHA == sha && o.Name == s.Name && o.Ref == s.Ref && o.PipelineID == s.PipelineID && (o.State == "running" || o.State == "pending") {
				n = i + 1
			}
		}
		if n > 0 && !transitions[g.statuses[n-1].State][s.State] {
			g.broke("statuses: %s cannot go from %s to %s", s.Name, g.statuses[n-1].State, s.State)
			http.Error(w, `{"message":"Cannot transition status via :`+s.State+` from :`+g.statuses[n-1].State+`"}`, http.StatusBadRequest)
			return
		}
		if n > 0 {
			g.statuses[n-1] = s
		} else {
			g.statuses = append(g.statuses, s)
			n = len(g.statuses)
		}
		g.received = append(g.received, s)
		g.hold(r)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"id": n, "sha": sha, "name": s.Name, "status": s.State, "target_url": s.TargetURL, "description": s.Description})
	}
}

// transitions are the moves GitLab's commit status state machine makes
// from a running or pending status (app/models/commit_status.rb): a
// running one never to skipped, nor to running again.
var transitions = map[string]map[string]bool{
	"pending": {"running": true, "success": true, "failed": true, "canceled": true, "skipped": true},
	"running": {"success": true, "failed": true, "canceled": true},
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}
