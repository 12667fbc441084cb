package notifytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// WorkflowJob is a job of a workflow run as "List jobs for a workflow run"
// shows it: the runner it went to, its status and when it completed.
type WorkflowJob struct {
	ID          int64
	RunnerName  string
	Status      string // queued, in_progress or completed
	CompletedAt time.Time
}

// SetJob adds or updates (by id) a job of run "owner/repo/run".
func (g *GitHub) SetJob(run string, j WorkflowJob) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.jobs == nil {
		g.jobs = map[string][]WorkflowJob{}
	}
	for i := range g.jobs[run] {
		if g.jobs[run][i].ID == j.ID {
			g.jobs[run][i] = j
			return
		}
	}
	g.jobs[run] = append(g.jobs[run], j)
}

// listJobs is "List jobs for a workflow run", a page at a time (per_page
// at most 100, as GitHub caps it), the next page linked as GitHub links it.
func (g *GitHub) listJobs(w http.ResponseWriter, r *http.Request, run string) {
	q := r.URL.Query()
	if f := q.Get("filter"); f != "" && f != "latest" && f != "all" {
		g.bad(w, "list jobs: filter %q", f)
		return
	}
	per, page := 30, 1
	if v := q.Get("per_page"); v != "" {
		per, _ = strconv.Atoi(v)
	}
	if v := q.Get("page"); v != "" {
		page, _ = strconv.Atoi(v)
	}
	if per < 1 || per > 100 || page < 1 {
		g.bad(w, "list jobs: per_page %q, page %q", q.Get("per_page"), q.Get("page"))
		return
	}
	all := g.jobs[run]
	from, to := min((page-1)*per, len(all)), min(page*per, len(all))
	jobs := []map[string]any{}
	for _, j := range all[from:to] {
		job := map[string]any{"id": j.ID, "run_id": json.Number(run[strings.LastIndex(run, "/")+1:]), "status": j.Status, "runner_name": j.RunnerName}
		if !j.CompletedAt.IsZero() {
			job["completed_at"] = j.CompletedAt.UTC().Format(time.RFC3339)
			job["conclusion"] = "success"
		}
		jobs = append(jobs, job)
	}
	if to < len(all) {
		next := *r.URL
		q.Set("page", strconv.Itoa(page+1))
		next.RawQuery = q.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<%s%s>; rel="next"`, g.Server.URL, next.RequestURI()))
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"total_count": len(all), "jobs": jobs})
}
