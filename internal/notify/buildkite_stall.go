package notify

import (
	"context"
	"fmt"
	"strings"

	"github.com/buildkite/go-buildkite/v4"
)

// The styles of a stall's annotation: warning while the runner stalls,
// success once it recovered or its pod ended with no death told, as
// GitLab's status of a stall goes from running to success.
const (
	StallOpenStyle = "warning"
	StallOverStyle = "success"
)

// StallAnnotationBody is the stall's annotation: its title as a heading,
// then its summary, which says the annotation is completed, not a check
// run.
func StallAnnotationBody(st Stall) string {
	summary := strings.Replace(StallSummary(st), "This check run is completed", "This annotation is completed", 1)
	return "#### " + markdownText(StallTitle(st)) + "\n\n" + summary
}

// TellStall annotates the build while the runner stalls, in the job's
// context, which the death's annotation then replaces; once the stall
// ended it replaces a still open one (StallWrite). The build is held to
// the pod as a death's is.
func (s *BuildkiteSender) TellStall(ctx context.Context, sd StallDelivery) (string, error) {
	d := Delivery{Record: sd.Stall.Record, Target: sd.Target}
	c, err := s.client(ctx)
	if err != nil {
		return "", err
	}
	b, err := s.build(ctx, c, d)
	if err != nil {
		return "", err
	}
	t := d.Target
	a, err := s.annotation(ctx, c, t)
	if err != nil {
		return "", err
	}
	if a != nil && (a.Style == "error" || a.Style == "info") {
		// The death's annotation is there: the stall is over.
		return where(b, t.Job), nil
	}
	style := StallOpenStyle
	switch StallWrite(sd.Stall.Phase, a != nil && a.Style == StallOpenStyle) {
	case StallNone:
		return where(b, t.Job), nil
	case StallComplete:
		style = StallOverStyle
	}
	_, resp, err := c.Annotations.Create(ctx, t.Organization, t.Pipeline, t.Build, buildkite.AnnotationCreate{
		Body: StallAnnotationBody(sd.Shown()), Style: style, Context: AnnotationContext(t.Job), Append: false,
	})
	if err != nil {
		return "", buildkiteFailure(resp, fmt.Errorf("annotating build %s of %s/%s with the stall: %w", t.Build, t.Organization, t.Pipeline, err), s.Now())
	}
	return where(b, t.Job), nil
}
