package alerts

import (
	"encoding/json"
	"go/ast"
	goparser "go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// controllerRuntime are the metrics of controller-runtime, client-go and the
// Prometheus Go collector that the binary serves and the queries may use;
// true marks a histogram.
var controllerRuntime = map[string]bool{
	"controller_runtime_webhook_requests_total":     false,
	"controller_runtime_webhook_latency_seconds":    true,
	"controller_runtime_webhook_requests_in_flight": false,
	"leader_election_master_status":                 false,
	"controller_runtime_reconcile_errors_total":     false,
	"workqueue_depth":                               false,
	"process_resident_memory_bytes":                 false,
	"go_memstats_heap_alloc_bytes":                  false,
}

// ownMetrics reads the metric names this repository's code defines, from
// the prometheus.*Opts literals in webhook/, internal/ and cmd/; true marks a
// histogram or summary, whose series carry _bucket, _sum and _count.
func ownMetrics(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	fset := token.NewFileSet()
	for _, root := range []string{"../../webhook", "../../internal", "../../cmd"} {
		require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := goparser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.CompositeLit)
				if !ok {
					return true
				}
				sel, ok := lit.Type.(*ast.SelectorExpr)
				if !ok || !strings.HasSuffix(sel.Sel.Name, "Opts") {
					return true
				}
				for _, e := range lit.Elts {
					kv, ok := e.(*ast.KeyValueExpr)
					if key, _ := kv.Key.(*ast.Ident); !ok || key == nil || key.Name != "Name" {
						continue
					}
					if s, ok := kv.Value.(*ast.BasicLit); ok && s.Kind == token.STRING {
						name, err := strconv.Unquote(s.Value)
						require.NoError(t, err)
						names[name] = sel.Sel.Name == "HistogramOpts" || sel.Sel.Name == "SummaryOpts"
					}
				}
				return true
			})
			return nil
		}))
	}
	require.Contains(t, names, "runnerguard_runner_deaths_total", "the walk found none of runnerguard's metrics")
	return names
}

// exists says whether a series name is served: a metric's own name, or a
// histogram's _bucket, _sum or _count.
func exists(known map[string]bool, name string) bool {
	if _, ok := known[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && known[base] {
			return true
		}
	}
	return false
}

// promql is Prometheus's parser with its defaults: no experimental
// functions, which a stock Prometheus refuses.
var promql = parser.NewParser(parser.Options{})

// grafanaRanges are Grafana's interval variables, which stand where PromQL
// wants a duration; any other $variable outside a label value is an error
// the parser reports.
var grafanaRanges = regexp.MustCompile(`\$__(rate_interval|interval|range)\b`)

// metricNames parses a query and returns the metric names it selects; every
// selector must name its metric.
func metricNames(t *testing.T, query string) []string {
	t.Helper()
	expr, err := promql.ParseExpr(grafanaRanges.ReplaceAllString(query, "5m"))
	require.NoError(t, err, "query %q", query)
	var names []string
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			assert.NotEmpty(t, vs.Name, "a selector without a metric name in %q", query)
			names = append(names, vs.Name)
		}
		return nil
	})
	require.NotEmpty(t, names, "query %q selects no metric", query)
	return names
}

// dashboardQueries returns every PromQL query of the dashboard, by panel,
// and the metrics its label_values() variables read.
func dashboardQueries(t *testing.T) (queries map[string][]string, variableMetrics []string) {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(raw, &d))
	queries = map[string][]string{}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, tg := range p.Targets {
			require.NotEmpty(t, tg.Expr, "panel %q", p.Title)
			queries[p.Title] = append(queries[p.Title], tg.Expr)
		}
	}
	labelValues := regexp.MustCompile(`^label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*), *[a-zA-Z_][a-zA-Z0-9_]*\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		m := labelValues.FindStringSubmatch(q["query"].(string))
		require.NotNil(t, m, "variable query %v", v.Query)
		variableMetrics = append(variableMetrics, m[1])
	}
	return queries, variableMetrics
}

// Every dashboard query parses as PromQL and names only metrics the code
// defines or controller-runtime serves.
func TestDashboardQueriesNameServedMetrics(t *testing.T) {
	known := ownMetrics(t)
	for name, h := range controllerRuntime {
		known[name] = h
	}
	queries, variables := dashboardQueries(t)
	require.NotEmpty(t, queries)
	for title, qs := range queries {
		for _, q := range qs {
			for _, name := range metricNames(t, q) {
				assert.True(t, exists(known, name), "panel %q queries %s, which runnerguard does not serve", title, name)
			}
		}
	}
	for _, name := range variables {
		assert.True(t, exists(known, name), "a dashboard variable reads %s, which runnerguard does not serve", name)
	}
}

// Every alert's expression parses and names only served metrics.
func TestAlertQueriesNameServedMetrics(t *testing.T) {
	known := ownMetrics(t)
	for name, h := range controllerRuntime {
		known[name] = h
	}
	for name, r := range rules(t, "").alerts() {
		for _, m := range metricNames(t, r.Expr) {
			assert.True(t, exists(known, m), "alert %s queries %s, which runnerguard does not serve", name, m)
		}
	}
}

// The check itself: a misspelt metric, a histogram suffix on a counter and
// a Grafana variable where PromQL wants a number are caught.
func TestTheCheckCatchesMistakes(t *testing.T) {
	known := ownMetrics(t)
	assert.False(t, exists(known, "runnerguard_runner_death_total"))
	assert.False(t, exists(known, "runnerguard_runner_deaths_total_bucket"))
	assert.True(t, exists(known, "runnerguard_runner_memory_peak_ratio_bucket"))
	_, err := promql.ParseExpr(grafanaRanges.ReplaceAllString(`rate(x[$__rate_interval]) > $threshold`, "5m"))
	assert.Error(t, err)
}
