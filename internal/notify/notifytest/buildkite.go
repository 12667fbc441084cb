package notifytest

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
)

// Annotation is a build annotation as Buildkite's REST API "Create an
// annotation on a build" takes it (buildkite.com/docs/apis/rest-api/
// annotations): body required, style one of success, info, warning or
// error, one annotation per context on a build, append adding to it.
type Annotation struct {
	Build    string `json:"-"` // org/pipeline/number
	Body     string `json:"body"`
	Style    string `json:"style"`
	Context  string `json:"context"`
	Priority int    `json:"priority"`
	Append   bool   `json:"append"`
	// Writes counts the requests that created or replaced it.
	Writes int `json:"-"`
}

// BuildkiteJob is a job of a build the fake knows, and the host of the
// agent that ran it ("" for none yet).
type BuildkiteJob struct {
	ID, AgentHostname string
}

// Buildkite is Buildkite's REST API (/v2) for one API access token: the
// builds it knows, read (read_builds), and their annotations, listed and
// created (write_builds).
type Buildkite struct {
	*httptest.Server
	Token string
	// Builds maps "org/pipeline/number" to the build's jobs.
	Builds map[string][]BuildkiteJob

	service
	annotations []Annotation
	agentHost   func(job string) string
}

// FollowAgents has the fake ask host for the host of the agent that ran a
// job it knows without one: a live Agent API's word (e2e/fleets'
// stand-in stack's, from the real agent's registration).
func (b *Buildkite) FollowAgents(host func(job string) string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.agentHost = host
}

// NewBuildkite starts the fake, on loopback.
func NewBuildkite(token string, builds map[string][]BuildkiteJob) *Buildkite {
	return NewBuildkiteOn(nil, token, builds)
}

// NewBuildkiteOn starts the fake on l (nil: loopback).
func NewBuildkiteOn(l net.Listener, token string, builds map[string][]BuildkiteJob) *Buildkite {
	b := &Buildkite{Token: token, Builds: builds}
	b.Server = serveOn(l, http.HandlerFunc(b.serve))
	return b
}

// AddJob makes a build's job known while the fake serves, or tells the
// host of the agent that ran a known one (a real fleet's jobs come as
// they come).
func (b *Buildkite) AddJob(build string, j BuildkiteJob) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.Builds == nil {
		b.Builds = map[string][]BuildkiteJob{}
	}
	for i, o := range b.Builds[build] {
		if o.ID == j.ID {
			b.Builds[build][i] = j
			return
		}
	}
	b.Builds[build] = append(b.Builds[build], j)
}

// Annotations are the annotations on the builds, as replaced since.
func (b *Buildkite) Annotations() []Annotation {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Annotation(nil), b.annotations...)
}

func (b *Buildkite) bad(w http.ResponseWriter, format string, a ...any) {
	msg := b.broke(format, a...)
	w.WriteHeader(http.StatusUnprocessableEntity)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}

func (b *Buildkite) serve(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.begin(w, r) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if r.Header.Get("Authorization") != "Bearer "+b.Token {
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": "Authentication required. Please supply a valid API Access Token"})
		return
	}
	// /v2/organizations/{org}/pipelines/{pipeline}/builds/{number}[/annotations]
	p := strings.Split(strings.TrimPrefix(r.URL.Path, "/v2/"), "/")
	if len(p) < 6 || p[0] != "organizations" || p[2] != "pipelines" || p[4] != "builds" {
		b.bad(w, "%s %s: no such endpoint", r.Method, r.URL.Path)
		return
	}
	build := p[1] + "/" + p[3] + "/" + p[5]
	jobs, ok := b.Builds[build]
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": "No build found"})
		return
	}
	switch {
	case len(p) == 6 && r.Method == http.MethodGet:
		var js []map[string]any
		for _, j := range jobs {
			if j.AgentHostname == "" && b.agentHost != nil {
				j.AgentHostname = b.agentHost(j.ID)
			}
			job := map[string]any{"id": j.ID, "type": "script", "state": "running"}
			if j.AgentHostname != "" {
				job["agent"] = map[string]any{"id": "agent-" + j.ID, "name": j.AgentHostname + "-1", "hostname": j.AgentHostname, "connection_state": "connected"}
			}
			js = append(js, job)
		}
		n, _ := strconv.Atoi(p[5])
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "build-" + build, "number": n, "state": "running", "jobs": js,
			"web_url": b.Server.URL + "/" + p[1] + "/" + p[3] + "/builds/" + p[5]})
	case len(p) == 7 && p[6] == "annotations" && r.Method == http.MethodGet:
		out := []map[string]any{}
		for i, a := range b.annotations {
			if a.Build == build {
				out = append(out, map[string]any{"id": strconv.Itoa(i), "context": a.Context, "style": a.Style, "scope": "build", "priority": a.Priority, "body_html": a.Body})
			}
		}
		_ = json.NewEncoder(w).Encode(out)
	case len(p) == 7 && p[6] == "annotations" && r.Method == http.MethodPost:
		b.annotate(w, r, build)
	default:
		b.bad(w, "%s %s: no such endpoint", r.Method, r.URL.Path)
	}
}

func (b *Buildkite) annotate(w http.ResponseWriter, r *http.Request, build string) {
	var a Annotation
	if err := json.NewDecoder(r.Body).Decode(&a); err != nil {
		b.bad(w, "annotations: %v", err)
		return
	}
	styles := []string{"success", "info", "warning", "error"}
	switch {
	case a.Body == "":
		b.bad(w, "annotations: body is required")
		return
	case a.Style != "" && !contains(styles, a.Style):
		b.bad(w, "annotations: style %q is none of %v", a.Style, styles)
		return
	case a.Priority != 0 && (a.Priority < 1 || a.Priority > 10):
		b.bad(w, "annotations: priority %d is not 1 to 10", a.Priority)
		return
	case len(a.Body) > 1<<20:
		b.bad(w, "annotations: body over 1 MiB")
		return
	}
	a.Build = build
	if a.Context == "" {
		a.Context = "default"
	}
	if a.Style == "" {
		a.Style = "default"
	}
	i := -1
	for j, o := range b.annotations {
		if o.Build == build && o.Context == a.Context {
			i = j
		}
	}
	switch {
	case i < 0:
		a.Writes = 1
		b.annotations = append(b.annotations, a)
		i = len(b.annotations) - 1
	case a.Append:
		b.annotations[i].Body += a.Body
		b.annotations[i].Writes++
	default:
		a.Writes = b.annotations[i].Writes + 1
		b.annotations[i] = a
	}
	b.hold(r)
	w.WriteHeader(http.StatusCreated)
	got := b.annotations[i]
	_ = json.NewEncoder(w).Encode(map[string]any{"id": strconv.Itoa(i), "context": got.Context, "style": got.Style, "scope": "build", "priority": 3, "body_html": got.Body})
}
