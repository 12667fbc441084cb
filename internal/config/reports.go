package config

import (
	"fmt"
	"net/url"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Reports configures the leader's reporter: which deaths are told, and
// where. Off unless a namespace or a preset opts in and a destination is
// set. Credentials are never here: each destination names a Secret in the
// release's namespace, which only the leader reads.
type Reports struct {
	// Namespaces whose deaths are told.
	Namespaces []string `json:"namespaces,omitempty"`
	// Presets whose deaths are told, in any namespace.
	Presets []runnerpod.PresetName `json:"presets,omitempty"`
	// SecretNamespace holds the destinations' Secrets (the release's).
	SecretNamespace string `json:"secretNamespace,omitempty"`
	// MaxAge: a record older than this when the reporter first sees it is
	// not told (an install that opts in later, a leader down for long).
	MaxAge metav1.Duration `json:"maxAge,omitempty"`
	// Disclose names whose reports to GitHub and GitLab may name
	// principals, nodes and UIDs: a check run or a commit status is as
	// public as its repository, so by default they are withheld.
	Disclose Selection `json:"disclose,omitempty"`
	// MaxAttempts bounds each report's attempts; then it is Failed.
	MaxAttempts int        `json:"maxAttempts,omitempty"`
	GitHub      *GitHub    `json:"github,omitempty"`
	GitLab      *GitLab    `json:"gitlab,omitempty"`
	Buildkite   *Buildkite `json:"buildkite,omitempty"`
	// Woodpecker tells a Woodpecker step's death on its commit, through
	// GitHub or GitLab (whichever is its forge, set above).
	Woodpecker *Woodpecker `json:"woodpecker,omitempty"`
	Sinks      []Sink      `json:"sinks,omitempty"`
}

// Selection selects deaths by namespace or by preset: those told
// (Reports' own namespaces and presets), those disclosed.
type Selection struct {
	Namespaces []string               `json:"namespaces,omitempty"`
	Presets    []runnerpod.PresetName `json:"presets,omitempty"`
}

// Has reports whether a death in namespace ns of preset p is selected.
func (d Selection) Has(ns string, p runnerpod.PresetName) bool {
	return slices.Contains(d.Namespaces, ns) || slices.Contains(d.Presets, p)
}

// GitHub: a check run on the workflow run's head commit, as a GitHub App.
// The Secret holds the App's private key under privateKey.
type GitHub struct {
	// URL is the API's base: https://api.github.com/ or a GitHub
	// Enterprise Server's https://HOST/api/v3/.
	URL   string `json:"url"`
	AppID int64  `json:"appID"`
	// InstallationID is the App's installation, or 0: the installation of
	// each report's repository, looked up (an App installed on several
	// organisations).
	InstallationID int64  `json:"installationID"`
	Secret         string `json:"secret"`
	LastWords      bool   `json:"lastWords,omitempty"`
	// Controllers are ARC's controllers' usernames: a runner pod's death
	// is told only when one of them created the pod (its recorded
	// creator), so the repository its EphemeralRunner names is that pod's,
	// never a pod an editor created under a vacated runner's name.
	Controllers []string `json:"controllers"`
}

// GitLab: an external commit status on the job's commit. The Secret holds
// a token under token.
type GitLab struct {
	// URL is the instance: https://gitlab.com or a self-managed one.
	URL    string `json:"url"`
	Secret string `json:"secret"`
	// Managers are the GitLab Runner managers' usernames: a build pod's
	// job is told only when one of them created the pod (its recorded
	// creator), so its project label is the manager's word.
	Managers []string `json:"managers"`
	// ManagerInRunnerNamespace accepts a manager that is a ServiceAccount
	// of the build pods' own namespace, which anyone granted edit there
	// can act as.
	ManagerInRunnerNamespace bool `json:"managerInRunnerNamespace,omitempty"`
}

// Buildkite: an annotation on the job's build, through Buildkite's REST
// API. The Secret holds an API access token (scopes read_builds and
// write_builds) under token.
type Buildkite struct {
	// URL is the REST API's base: https://api.buildkite.com/.
	URL    string `json:"url"`
	Secret string `json:"secret"`
	// Creators are the usernames that create the stack's job pods:
	// kube-controller-manager's job controller, which makes each from the
	// Kubernetes Job agent-stack-k8s created. A pod anyone else created is
	// never told; one the job controller made is told only on a build whose
	// job of the pod's UUID Buildkite says ran on an agent of the pod's
	// host name, so a Job an editor made with another job's marks is not.
	Creators []string `json:"creators"`
}

// Woodpecker: a step pod's death on its commit, on its forge (GitHub: a
// check run; GitLab: a commit status), with the destinations' own
// credentials.
type Woodpecker struct {
	// Agents are the Woodpecker agents' usernames: a step pod is told
	// only when one of them created it, so its repository and commit are
	// the agent's (and its pipeline's) word.
	Agents []string `json:"agents"`
	// AgentInRunnerNamespace accepts an agent that is a ServiceAccount of
	// the step pods' own namespace (the backend's default), which anyone
	// granted edit there can act as.
	AgentInRunnerNamespace bool `json:"agentInRunnerNamespace,omitempty"`
}

// Sink: the record as a CloudEvent over HTTP. The Secret holds the HMAC
// key under hmacKey.
type Sink struct {
	Name      string `json:"name"`
	URL       string `json:"url"`
	Secret    string `json:"secret"`
	LastWords bool   `json:"lastWords,omitempty"`
}

// The defaults of a report's attempts and of a record's age to be told.
const (
	DefaultMaxAttempts = 6
	DefaultReportAge   = time.Hour
)

// Enabled: a destination is set and something opts in.
func (r Reports) Enabled() bool {
	return (r.GitHub != nil || r.GitLab != nil || r.Buildkite != nil || len(r.Sinks) > 0) && (len(r.Namespaces) > 0 || len(r.Presets) > 0)
}

// SecretNames are the Secrets the leader reads, each once.
func (r Reports) SecretNames() []string {
	var names []string
	add := func(n string) {
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if r.GitHub != nil {
		add(r.GitHub.Secret)
	}
	if r.GitLab != nil {
		add(r.GitLab.Secret)
	}
	if r.Buildkite != nil {
		add(r.Buildkite.Secret)
	}
	for _, s := range r.Sinks {
		add(s.Secret)
	}
	return names
}

func validateReports(c Config) []error {
	r := c.Reports
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("reports."+format, a...)) }
	for _, sel := range []struct {
		field string
		ps    []runnerpod.PresetName
	}{{"presets", r.Presets}, {"disclose.presets", r.Disclose.Presets}} {
		for _, p := range sel.ps {
			if !presets.Known(p) {
				bad("%s: unknown preset %q", sel.field, p)
			}
		}
	}
	if r.MaxAttempts < 1 {
		bad("maxAttempts: %d is below 1", r.MaxAttempts)
	}
	if r.MaxAge.Duration <= 0 {
		bad("maxAge: %s is not positive", r.MaxAge.Duration)
	}
	if len(r.SecretNames()) > 0 && r.SecretNamespace == "" {
		bad("secretNamespace: the Secrets' namespace is needed")
	}
	secret := func(where, name string) {
		if len(validation.IsDNS1123Subdomain(name)) > 0 {
			bad("%s.secret: %q is not a Secret's name", where, name)
		}
	}
	if g := r.GitHub; g != nil {
		errs = append(errs, baseURL("reports.github.url", g.URL)...)
		if g.AppID <= 0 || g.InstallationID < 0 {
			bad("github: appID is needed, and installationID is an installation's id or 0 (each repository's)")
		}
		// Without ARC's controllers GitHub hears of Woodpecker's steps
		// alone: ARC's runners are then never told.
		if (len(g.Controllers) == 0 && r.Woodpecker == nil) || slices.Contains(g.Controllers, "") {
			bad("github.controllers: ARC's controllers' usernames are needed: a runner pod's repository is trusted only when one of them created the pod")
		}
		secret("github", g.Secret)
	}
	if g := r.GitLab; g != nil {
		errs = append(errs, baseURL("reports.gitlab.url", g.URL)...)
		if len(g.Managers) == 0 || slices.Contains(g.Managers, "") {
			bad("gitlab.managers: the GitLab Runner managers' usernames are needed: a build pod's project is trusted only when one of them created it")
		}
		secret("gitlab", g.Secret)
	}
	errs = append(errs, validateCIReports(r)...)
	seen := map[string]bool{}
	for i, s := range r.Sinks {
		if len(validation.IsDNS1123Label(s.Name)) > 0 || seen[s.Name] {
			bad("sinks[%d].name: %q must be a unique DNS label", i, s.Name)
		}
		seen[s.Name] = true
		errs = append(errs, baseURL(fmt.Sprintf("reports.sinks[%d].url", i), s.URL)...)
		secret(fmt.Sprintf("sinks[%d]", i), s.Secret)
	}
	return errs
}

// validateCIReports checks the destinations of the fleets told on their
// CI service beyond GitHub and GitLab: Buildkite's, Woodpecker's.
func validateCIReports(r Reports) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("reports."+format, a...)) }
	if b := r.Buildkite; b != nil {
		errs = append(errs, baseURL("reports.buildkite.url", b.URL)...)
		if len(b.Creators) == 0 || slices.Contains(b.Creators, "") {
			bad("buildkite.creators: the usernames that create the stack's job pods are needed (the job controller, system:serviceaccount:kube-system:job-controller)")
		}
		if len(validation.IsDNS1123Subdomain(b.Secret)) > 0 {
			bad("buildkite.secret: %q is not a Secret's name", b.Secret)
		}
	}
	if w := r.Woodpecker; w != nil {
		if len(w.Agents) == 0 || slices.Contains(w.Agents, "") {
			bad("woodpecker.agents: the Woodpecker agents' usernames are needed: a step pod's commit is trusted only when one of them created it")
		}
		if r.GitHub == nil && r.GitLab == nil {
			bad("woodpecker: a step's death is told through reports.github or reports.gitlab: turn on its forge's")
		}
	}
	return errs
}

func baseURL(field, raw string) []error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return []error{fmt.Errorf("%s: %q is not an http(s) URL", field, raw)}
	}
	return nil
}
