package notify_test

import (
	"bytes"
	"encoding/xml"
	"flag"
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/internal/notify/notifytest"
)

var update = flag.Bool("update", false, "redraw the pictures in docs/operations/img from what the fakes receive")

// pictures are the docs' pictures of a report, drawn from what the fakes
// of GitHub and GitLab received: kept in step with the product by this
// test (go test ./internal/notify -run TestPictures -update redraws them).
const pictures = "../../docs/operations/img"

func TestPicturesOfTheReportsAreWhatTheServicesReceive(t *testing.T) {
	// The record as a real death leaves it: its pod's identity, node and
	// times, fixed so that the pictures are the same at each run.
	r := oom()
	start := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	r.Record.UID, r.Record.Node, r.Record.Signal = "5f0c2a51-7d3e-4f5b-9a43-0c1f8e6b2d17", "ip-10-0-3-17", 9
	r.Record.StartedAt, r.Record.FinishedAt = &metav1.Time{Time: start}, &metav1.Time{Time: start.Add(59 * time.Second)}
	r.Record.Job.Workflow = "acme/app/.github/workflows/ci.yml@refs/heads/main"
	w := newWorld(t, r, build("probe", manager, "1234"))
	w.cfg.Sinks = nil
	w.reconcile(t, w.leader(), "oom")
	w.reconcile(t, w.leader(), "probe")
	require.Len(t, w.gh.CheckRuns(), 1)
	require.Len(t, w.gl.Statuses(), 1)
	for name, svg := range map[string][]byte{
		"github-check-run.svg":     checkRunPicture(w.gh.CheckRuns()[0], w.gh.Server.URL),
		"gitlab-commit-status.svg": commitStatusPicture(w.gl.Statuses()[0], w.gl.URL),
	} {
		path := filepath.Join(pictures, name)
		if *update {
			require.NoError(t, os.MkdirAll(pictures, 0o755))
			require.NoError(t, os.WriteFile(path, svg, 0o644))
			continue
		}
		d := xml.NewDecoder(bytes.NewReader(svg))
		for {
			_, err := d.Token()
			if err == io.EOF {
				break
			}
			require.NoError(t, err, name+" is well-formed XML")
		}
		got, err := os.ReadFile(path)
		require.NoError(t, err, "go test ./internal/notify -run TestPictures -update draws it")
		assert.Equal(t, string(svg), string(got), name+" is not what the fake received: redraw it with -update")
	}
}

// canvas draws lines of text, each at its own height, as SVG.
type canvas struct {
	b      bytes.Buffer
	y, max int
}

const (
	width  = 860
	lineH  = 18
	margin = 16
)

func (c *canvas) text(x int, s, style string) {
	fmt.Fprintf(&c.b, `<text x="%d" y="%d" %s>%s</text>`+"\n", x, c.y, style, html.EscapeString(s))
}

func (c *canvas) svg(title string) []byte {
	var out bytes.Buffer
	fmt.Fprintf(&out, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`+"\n",
		width, c.y+margin, width, c.y+margin, html.EscapeString(title))
	fmt.Fprintf(&out, `<rect x="0.5" y="0.5" width="%d" height="%d" rx="6" fill="#ffffff" stroke="#d0d7de"/>`+"\n", width-1, c.y+margin-1)
	out.Write(c.b.Bytes())
	out.WriteString("</svg>\n")
	return out.Bytes()
}

// wrap cuts s into lines of at most n characters.
func wrap(s string, n int) []string {
	var out []string
	for utf8.RuneCountInString(s) > n {
		r := []rune(s)
		cut := n
		if i := strings.LastIndex(string(r[:n]), " "); i > n/2 {
			cut = utf8.RuneCountInString(string(r[:n])[:i])
		}
		out = append(out, string(r[:cut]))
		s = strings.TrimLeft(string(r[cut:]), " ")
	}
	return append(out, s)
}

const (
	font  = `font-family="-apple-system,Segoe UI,Helvetica,Arial,sans-serif"`
	sans  = font + ` font-size="14"`
	small = font + ` font-size="12"`
	mono  = `font-family="ui-monospace,SFMono-Regular,Menlo,Consolas,monospace" font-size="12"`
)

// checkRunPicture draws the check run as GitHub's Checks tab shows it: the
// failed check's name, its title, and its summary (Markdown: its fenced
// block as code, the rest as text).
func checkRunPicture(cr notifytest.CheckRun, base string) []byte {
	c := &canvas{y: 30}
	fmt.Fprintf(&c.b, `<circle cx="%d" cy="%d" r="8" fill="#cf222e"/><path d="M%d %d l8 8 M%d %d l-8 8" stroke="#fff" stroke-width="2"/>`+"\n",
		margin+8, c.y-5, margin+4, c.y-9, margin+12, c.y-9)
	c.text(margin+24, cr.Name, sans+` font-weight="600"`)
	c.text(width-margin, cr.Conclusion, sans+` fill="#cf222e" text-anchor="end"`)
	c.y += lineH + 10
	c.text(margin, cr.Output.Title, font+` font-size="20" font-weight="600"`)
	c.y += lineH + 8
	code := false
	for _, l := range strings.Split(strings.TrimRight(cr.Output.Summary, "\n"), "\n") {
		switch {
		case strings.HasPrefix(l, "```"):
			code = !code
			c.y += 4
			continue
		case code:
			for _, part := range wrap(l, 118) {
				fmt.Fprintf(&c.b, `<rect x="%d" y="%d" width="%d" height="%d" fill="#f6f8fa"/>`+"\n", margin, c.y-13, width-2*margin, lineH)
				c.text(margin+8, part, mono+` fill="#1f2328" xml:space="preserve"`)
				c.y += lineH
			}
			continue
		case l == "":
			c.y += 6
			continue
		}
		for _, part := range wrap(strings.ReplaceAll(l, "`", ""), 100) {
			c.text(margin, part, sans+` fill="#1f2328"`)
			c.y += lineH + 2
		}
	}
	c.y += 4
	c.text(margin, "Details: "+strings.Replace(cr.DetailsURL, base, "https://github.com", 1), small+` fill="#0969da"`)
	c.y += 8
	return c.svg("GitHub check run: " + cr.Name)
}

// commitStatusPicture draws the commit status as a GitLab pipeline lists
// an external job: its state, name, description and link. The fakes'
// addresses are drawn as the services' own.
func commitStatusPicture(s notifytest.Status, base string) []byte {
	c := &canvas{y: 32}
	fmt.Fprintf(&c.b, `<rect x="%d" y="%d" width="58" height="22" rx="11" fill="#fcf1ef" stroke="#dd2b0e"/>`+"\n", margin, c.y-16)
	c.text(margin+29, s.State, small+` fill="#c91c00" text-anchor="middle"`)
	c.text(margin+72, s.Name, sans+` font-weight="600"`)
	c.text(width-margin, "external · pipeline #"+fmt.Sprint(s.PipelineID)+" · "+s.Ref, small+` fill="#626168" text-anchor="end"`)
	c.y += lineH + 8
	c.text(margin+72, s.Description, sans+` fill="#333238"`)
	c.y += lineH + 4
	c.text(margin+72, strings.Replace(s.TargetURL, base, "https://gitlab.example.com", 1), small+` fill="#1f75cb"`)
	c.y += 4
	return c.svg("GitLab commit status: " + s.Name)
}
