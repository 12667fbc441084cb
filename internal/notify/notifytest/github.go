package notifytest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// CheckRun is a check run as GitHub's "Create a check run" takes it.
type CheckRun struct {
	Repository  string `json:"-"`
	Name        string `json:"name"`
	HeadSHA     string `json:"head_sha"`
	ExternalID  string `json:"external_id"`
	Status      string `json:"status"`
	Conclusion  string `json:"conclusion"`
	StartedAt   string `json:"started_at"`
	CompletedAt string `json:"completed_at"`
	DetailsURL  string `json:"details_url"`
	Output      struct {
		Title   string `json:"title"`
		Summary string `json:"summary"`
	} `json:"output"`
}

// GitHub is a GitHub Enterprise Server's REST API (base /api/v3/) for one
// App installation: the App's JWT exchanged for an installation token, the
// workflow runs it knows, check runs created and listed.
type GitHub struct {
	*httptest.Server
	AppID, InstallationID int64
	Key                   []byte // the App's private key, PEM
	// Runs maps "owner/repo/run" to the run's head commit.
	Runs map[string]string
	// Repos maps "owner/repo" to the repository's id, for the reads of
	// a repository (Woodpecker's steps name theirs by id too).
	Repos map[string]int64

	service
	pub       *rsa.PublicKey
	token     string
	checkRuns []CheckRun
	// jobs maps "owner/repo/run" to the run's jobs.
	jobs map[string][]WorkflowJob
}

// NewGitHub starts the fake with a fresh App key, on loopback.
func NewGitHub(appID, installationID int64, runs map[string]string) *GitHub {
	return NewGitHubOn(nil, appID, installationID, runs)
}

// NewGitHubOn starts the fake on l (nil: loopback), e.g. an address the
// cluster's pods reach.
func NewGitHubOn(l net.Listener, appID, installationID int64, runs map[string]string) *GitHub {
	k, _ := rsa.GenerateKey(rand.Reader, 2048)
	g := &GitHub{AppID: appID, InstallationID: installationID, Runs: runs, pub: &k.PublicKey, token: "ghs_fake" + strconv.FormatInt(installationID, 10),
		Key: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})}
	g.Server = serveOn(l, http.HandlerFunc(g.serve))
	return g
}

// URL is the API's base, as GHES serves it.
func (g *GitHub) URL() string { return g.Server.URL + "/api/v3/" }

// CheckRuns are the check runs created, as updated since.
func (g *GitHub) CheckRuns() []CheckRun {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]CheckRun(nil), g.checkRuns...)
}

func (g *GitHub) bad(w http.ResponseWriter, format string, a ...any) {
	msg := g.broke(format, a...)
	http.Error(w, `{"message":"`+msg+`"}`, http.StatusUnprocessableEntity)
}

func (g *GitHub) serve(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.begin(w, r) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	path, ok := strings.CutPrefix(r.URL.Path, "/api/v3/")
	if !ok {
		g.bad(w, "%s %s: not under /api/v3/", r.Method, r.URL.Path)
		return
	}
	if path == fmt.Sprintf("app/installations/%d/access_tokens", g.InstallationID) && r.Method == http.MethodPost {
		g.exchange(w, r)
		return
	}
	if p := strings.Split(path, "/"); len(p) == 4 && p[0] == "repos" && p[3] == "installation" && r.Method == http.MethodGet {
		g.installation(w, r, p[1]+"/"+p[2])
		return
	}
	if r.Header.Get("Authorization") != "token "+g.token {
		g.bad(w, "%s %s: authorization %q is not the installation's token", r.Method, path, r.Header.Get("Authorization"))
		return
	}
	parts := strings.Split(path, "/")
	switch {
	case len(parts) == 7 && parts[0] == "repos" && parts[3] == "actions" && parts[4] == "runs" && parts[6] == "jobs" && r.Method == http.MethodGet:
		g.listJobs(w, r, parts[1]+"/"+parts[2]+"/"+parts[5])
	case len(parts) == 6 && parts[0] == "repos" && parts[3] == "actions" && parts[4] == "runs" && r.Method == http.MethodGet:
		sha, ok := g.Runs[parts[1]+"/"+parts[2]+"/"+parts[5]]
		if !ok {
			http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"id": json.Number(parts[5]), "head_sha": sha,
			"html_url": g.Server.URL + "/" + parts[1] + "/" + parts[2] + "/actions/runs/" + parts[5]})
	case len(parts) == 3 && parts[0] == "repos" && r.Method == http.MethodGet:
		id, ok := g.Repos[parts[1]+"/"+parts[2]]
		if !ok {
			http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "name": parts[2], "full_name": parts[1] + "/" + parts[2],
			"html_url": g.Server.URL + "/" + parts[1] + "/" + parts[2]})
	case len(parts) == 4 && parts[0] == "repos" && parts[3] == "check-runs" && r.Method == http.MethodPost:
		g.create(w, r, parts[1]+"/"+parts[2])
	case len(parts) == 5 && parts[0] == "repos" && parts[3] == "check-runs" && r.Method == http.MethodPatch:
		g.update(w, r, parts[1]+"/"+parts[2], parts[4])
	case len(parts) == 6 && parts[0] == "repos" && parts[3] == "commits" && parts[5] == "check-runs" && r.Method == http.MethodGet:
		g.list(w, r, parts[1]+"/"+parts[2], parts[4])
	default:
		g.bad(w, "%s %s: no such endpoint", r.Method, path)
	}
}

// exchange checks the App's JWT and hands out the installation token.
func (g *GitHub) exchange(w http.ResponseWriter, r *http.Request) {
	if !g.asApp(w, r, "access_tokens") {
		return
	}
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"token": g.token, "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
}

// installation is "Get a repository installation for the authenticated
// app": the one installation, for a repository it knows a run of.
func (g *GitHub) installation(w http.ResponseWriter, r *http.Request, repo string) {
	if !g.asApp(w, r, "installation") {
		return
	}
	for k := range g.Runs {
		if strings.HasPrefix(k, repo+"/") {
			_ = json.NewEncoder(w).Encode(map[string]any{"id": g.InstallationID, "app_id": g.AppID,
				"access_tokens_url": fmt.Sprintf("%s/api/v3/app/installations/%d/access_tokens", g.Server.URL, g.InstallationID)})
			return
		}
	}
	http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
}

// asApp checks that the request is the App's own, with its JWT (RS256, iss
// the App id, exp within ten minutes), and answers it if not.
func (g *GitHub) asApp(w http.ResponseWriter, r *http.Request, what string) bool {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		g.bad(w, "%s: no Bearer JWT", what)
		return false
	}
	claims := &jwt.RegisteredClaims{}
	_, err := jwt.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
		if t.Method != jwt.SigningMethodRS256 {
			return nil, fmt.Errorf("alg %v", t.Header["alg"])
		}
		return g.pub, nil
	})
	switch {
	case err != nil:
		g.bad(w, "%s: the JWT: %v", what, err)
		return false
	case claims.Issuer != strconv.FormatInt(g.AppID, 10):
		g.bad(w, "%s: iss %q is not the App's id", what, claims.Issuer)
		return false
	case claims.ExpiresAt == nil || claims.ExpiresAt.Sub(time.Now()) > 10*time.Minute:
		g.bad(w, "%s: exp more than ten minutes ahead", what)
		return false
	}
	return true
}

func (g *GitHub) create(w http.ResponseWriter, r *http.Request, repo string) {
	var cr CheckRun
	if err := json.NewDecoder(r.Body).Decode(&cr); err != nil {
		g.bad(w, "check-runs: %v", err)
		return
	}
	_, err := time.Parse(time.RFC3339, cr.CompletedAt)
	switch {
	case cr.Name == "" || len(cr.HeadSHA) != 40:
		g.bad(w, "check-runs: name and a head_sha of 40 hex digits are required")
	case cr.Status == "completed" && (cr.Conclusion == "" || err != nil):
		g.bad(w, "check-runs: a completed run needs a conclusion and completed_at (ISO 8601)")
	case cr.Status != "completed" && cr.Conclusion != "":
		g.bad(w, "check-runs: a conclusion completes the run; status %q", cr.Status)
	case cr.Output.Title == "" || cr.Output.Summary == "" || len([]rune(cr.Output.Summary)) > 65535:
		g.bad(w, "check-runs: output needs a title and a summary of at most 65535 characters")
	default:
		cr.Repository = repo
		g.checkRuns = append(g.checkRuns, cr)
		n := len(g.checkRuns)
		g.hold(r)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(g.shown(cr, n))
	}
}

// update is "Update a check run": the fields sent replace the run's.
func (g *GitHub) update(w http.ResponseWriter, r *http.Request, repo, id string) {
	n, err := strconv.Atoi(id)
	if err != nil || n < 1 || n > len(g.checkRuns) || g.checkRuns[n-1].Repository != repo {
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
		return
	}
	var patch map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&patch); err != nil {
		g.bad(w, "check-runs/%s: %v", id, err)
		return
	}
	cr := g.checkRuns[n-1]
	raw, _ := json.Marshal(patch)
	if err := json.Unmarshal(raw, &cr); err != nil {
		g.bad(w, "check-runs/%s: %v", id, err)
		return
	}
	_, terr := time.Parse(time.RFC3339, cr.CompletedAt)
	switch {
	case cr.Status == "completed" && (cr.Conclusion == "" || terr != nil):
		g.bad(w, "check-runs/%s: a completed run needs a conclusion and completed_at (ISO 8601)", id)
	case cr.Output.Title == "" || cr.Output.Summary == "" || len([]rune(cr.Output.Summary)) > 65535:
		g.bad(w, "check-runs/%s: output needs a title and a summary of at most 65535 characters", id)
	default:
		g.checkRuns[n-1] = cr
		g.hold(r)
		_ = json.NewEncoder(w).Encode(g.shown(cr, n))
	}
}

// shown is the check run as GitHub answers it.
func (g *GitHub) shown(cr CheckRun, n int) map[string]any {
	return map[string]any{"id": n, "name": cr.Name, "external_id": cr.ExternalID, "status": cr.Status, "conclusion": cr.Conclusion,
		"html_url": fmt.Sprintf("%s/%s/runs/%d", g.Server.URL, cr.Repository, n)}
}

func (g *GitHub) list(w http.ResponseWriter, r *http.Request, repo, sha string) {
	var out []map[string]any
	for i, cr := range g.checkRuns {
		if cr.Repository == repo && cr.HeadSHA == sha && (r.URL.Query().Get("check_name") == "" || r.URL.Query().Get("check_name") == cr.Name) {
			out = append(out, g.shown(cr, i+1))
		}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"total_count": len(out), "check_runs": out})
}
