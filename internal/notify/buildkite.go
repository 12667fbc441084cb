package notify

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/buildkite/go-buildkite/v4"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/runnerguard/runnerguard/internal/death"
)

// BuildkiteSender annotates the job's build through Buildkite's REST API
// (POST .../builds/{number}/annotations, scope write_builds), once it has
// read the build (scope read_builds) and found that the job ran on an
// agent of the dead pod's host name: the build and the job are the Job's
// marks, which the stack wrote, but who made the Job is not recorded.
type BuildkiteSender struct {
	// BaseURL: https://api.buildkite.com/.
	BaseURL string
	// Token is read from the Secret at each report, so a rotated token
	// needs no restart.
	Token      func(ctx context.Context) (string, error)
	HTTPClient *http.Client
	Now        func() time.Time
}

// client is a client with the token as read now. The library retries a
// read Buildkite answered Too Many Requests by itself, within the
// attempt's time; every other retry is the reporter's, on the record.
func (s *BuildkiteSender) client(ctx context.Context) (*buildkite.Client, error) {
	token, err := s.Token(ctx)
	if err != nil {
		return nil, err
	}
	opts := []buildkite.ClientOpt{buildkite.WithBaseURL(strings.TrimRight(s.BaseURL, "/") + "/"), buildkite.WithTokenAuth(token), buildkite.WithUserAgent("runnerguard")}
	if s.HTTPClient != nil {
		opts = append(opts, buildkite.WithHTTPClient(s.HTTPClient))
	}
	return buildkite.NewClient(opts...)
}

// AnnotationContext is the annotation's context: one per job, so that a
// second attempt of the same report replaces the first (Buildkite keeps
// one annotation per context on a build) and two jobs' deaths on one
// build are two annotations.
func AnnotationContext(job string) string { return "runnerguard-" + job }

// AnnotationStyle is the death's annotation's style: info for a runner
// ended on purpose, error for any other death. A stall's are others
// (StallStyle), so that the death's is told from the stall's it replaces.
func AnnotationStyle(r death.Record) string {
	if r.Deliberate() {
		return "info"
	}
	return "error"
}

// AnnotationBody is the annotation: the title as a heading, then the
// summary a check run has, whose facts are fenced. Buildkite renders
// Markdown and some HTML, so the title, which names a principal where
// disclosed, is escaped.
func AnnotationBody(r death.Record, lastWords bool) string {
	return "#### " + markdownText(Title(r)) + "\n\n" + Summary(r, lastWords)
}

// markdownText is s shown as itself in Markdown: its punctuation escaped,
// and the characters HTML reads as entities.
func markdownText(s string) string {
	var b strings.Builder
	for _, c := range s {
		switch {
		case c == '<':
			b.WriteString("&lt;")
		case c == '>':
			b.WriteString("&gt;")
		case c == '&':
			b.WriteString("&amp;")
		case strings.ContainsRune("\\`*_{}[]()#+-.!|~:", c):
			b.WriteRune('\\')
			b.WriteRune(c)
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// PodHostname is the host name a pod's containers see: its name, cut to
// a DNS label's length as the kubelet cuts it, without trailing dashes or
// dots. The stack sets no hostname of its own.
func PodHostname(pod string) string {
	if len(pod) <= validation.DNS1123LabelMaxLength {
		return pod
	}
	return strings.TrimRight(pod[:validation.DNS1123LabelMaxLength], "-.")
}

// BuildkiteJobRan is nil when Buildkite says the build's job ran on an
// agent whose host is the pod, else why not: a Job made with another
// job's marks is a pod of another name, which never ran that job's agent.
func BuildkiteJobRan(b buildkite.Build, job, pod string) error {
	for _, j := range b.Jobs {
		if j.ID != job {
			continue
		}
		switch h := j.Agent.Hostname; {
		case h == "":
			return &NotTold{Reason: fmt.Sprintf("Buildkite names no agent host for job %s of build %d: the pod is not shown to have run it", job, b.Number)}
		case h != PodHostname(pod):
			return &NotTold{Reason: fmt.Sprintf("Buildkite says job %s of build %d ran on agent host %q, not on this pod", job, b.Number, h)}
		}
		return nil
	}
	return &NotTold{Reason: fmt.Sprintf("build %d has no job %s", b.Number, job)}
}

// build reads the target's build and holds it to the pod.
func (s *BuildkiteSender) build(ctx context.Context, c *buildkite.Client, d Delivery) (buildkite.Build, error) {
	t := d.Target
	b, resp, err := c.Builds.Get(ctx, t.Organization, t.Pipeline, t.Build, nil)
	if err != nil {
		return b, buildkiteFailure(resp, fmt.Errorf("reading build %s of %s/%s: %w", t.Build, t.Organization, t.Pipeline, err), s.Now())
	}
	return b, BuildkiteJobRan(b, t.Job, d.Record.Pod)
}

// where is the job on the build's page.
func where(b buildkite.Build, job string) string { return b.WebURL + "#" + job }

// Find looks for the death's annotation on the build: the job's context
// in a death's style, not the stall's that it replaces.
func (s *BuildkiteSender) Find(ctx context.Context, d Delivery) (string, bool, error) {
	c, err := s.client(ctx)
	if err != nil {
		return "", false, err
	}
	b, err := s.build(ctx, c, d)
	if err != nil {
		return "", false, err
	}
	a, err := s.annotation(ctx, c, d.Target)
	if err != nil || a == nil || (a.Style != "error" && a.Style != "info") {
		return "", false, err
	}
	return where(b, d.Target.Job), true, nil
}

// annotation is the job's annotation on the build, nil for none.
func (s *BuildkiteSender) annotation(ctx context.Context, c *buildkite.Client, t Target) (*buildkite.Annotation, error) {
	opt := &buildkite.AnnotationListOptions{ListOptions: buildkite.ListOptions{PerPage: 100}}
	for page := 1; page <= maxAnnotationPages; page++ {
		opt.Page = page
		as, resp, err := c.Annotations.ListByBuild(ctx, t.Organization, t.Pipeline, t.Build, opt)
		if err != nil {
			return nil, buildkiteFailure(resp, fmt.Errorf("listing the annotations of build %s: %w", t.Build, err), s.Now())
		}
		for i := range as {
			if as[i].Context == AnnotationContext(t.Job) {
				return &as[i], nil
			}
		}
		if resp == nil || resp.NextPage == 0 {
			break
		}
	}
	return nil, nil
}

// maxAnnotationPages bounds the walk of a build's annotations: one past
// it is not looked for, and is replaced, not duplicated, by a send.
const maxAnnotationPages = 10

// Send annotates the build: the record as its build's page may show it,
// in the job's context, replacing (not appending to) an earlier one.
func (s *BuildkiteSender) Send(ctx context.Context, d Delivery) (string, error) {
	c, err := s.client(ctx)
	if err != nil {
		return "", err
	}
	b, err := s.build(ctx, c, d)
	if err != nil {
		return "", err
	}
	t := d.Target
	_, resp, err := c.Annotations.Create(ctx, t.Organization, t.Pipeline, t.Build, buildkite.AnnotationCreate{
		Body: AnnotationBody(d.Shown(), d.Target.LastWords), Style: AnnotationStyle(d.Record), Context: AnnotationContext(t.Job), Append: false,
	})
	if err != nil {
		return "", buildkiteFailure(resp, fmt.Errorf("annotating build %s of %s/%s: %w", t.Build, t.Organization, t.Pipeline, err), s.Now())
	}
	return where(b, t.Job), nil
}

// buildkiteFailure reads the wait from the response: Buildkite's rate
// limit answers Too Many Requests with RateLimit-Reset, in seconds from
// now.
func buildkiteFailure(resp *buildkite.Response, err error, now time.Time) error {
	var r *http.Response
	var e *buildkite.ErrorResponse
	switch {
	case resp != nil:
		r = resp.Response
	case errors.As(err, &e):
		r = e.Response
	}
	f := failure(r, err, now)
	var ff *Failure
	if errors.As(f, &ff) && r != nil && ff.After == 0 && r.StatusCode == http.StatusTooManyRequests {
		ff.After = resetAfter(r.Header.Get("RateLimit-Reset"))
	}
	return f
}

// resetAfter reads Buildkite's RateLimit-Reset: the seconds until the
// limit resets.
func resetAfter(v string) time.Duration {
	var s int64
	if _, err := fmt.Sscan(v, &s); err != nil || s < 0 {
		return 0
	}
	return time.Duration(s) * time.Second
}
