package chart_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/yaml"
)

// pinnedKubeVersions are the Kubernetes releases the suites' API servers are
// built from, oldest first: hack/tools' (the default, every suite's) and
// each hack/kube-1.N's (make compat's).
func pinnedKubeVersions(t *testing.T) []*utilversion.Version {
	t.Helper()
	mods, err := filepath.Glob("../../hack/kube-1.*/go.mod")
	require.NoError(t, err)
	mods = append(mods, "../../hack/tools/go.mod")
	pin := regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes (v\S+)$`)
	toolchain := regexp.MustCompile(`(?m)^toolchain (\S+)$`)
	var versions []*utilversion.Version
	for _, m := range mods {
		b, err := os.ReadFile(m)
		require.NoError(t, err)
		match := pin.FindSubmatch(b)
		require.NotNil(t, match, "%s pins no k8s.io/kubernetes", m)
		versions = append(versions, utilversion.MustParseSemantic(string(match[1])))
		if tc := toolchain.FindSubmatch(b); tc != nil {
			toolchains["k8s.io/kubernetes@"+string(match[1])] = string(tc[1])
		}
	}
	slices.SortFunc(versions, func(a, b *utilversion.Version) int {
		switch {
		case a.LessThan(b):
			return -1
		case b.LessThan(a):
			return 1
		}
		return 0
	})
	return versions
}

// The oldest server a suite runs on is the oldest minor the chart accepts,
// so what the chart claims is what make compat tests.
func TestTheOldestPinnedServerIsTheChartsMinimum(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	require.NoError(t, err)
	var chart struct{ KubeVersion string }
	require.NoError(t, yaml.Unmarshal(b, &chart))
	minimum, ok := strings.CutPrefix(chart.KubeVersion, ">=")
	require.True(t, ok, "kubeVersion %q is a minimum", chart.KubeVersion)
	oldest := pinnedKubeVersions(t)[0]
	want := utilversion.MustParseSemantic(minimum)
	assert.Equal(t, []uint{want.Major(), want.Minor()}, []uint{oldest.Major(), oldest.Minor()},
		"Chart.yaml's kubeVersion %s against the oldest pinned server %s", chart.KubeVersion, oldest)
}

// Every CEL expression the chart ships, its policies' and its webhooks'
// matchConditions, as each pinned server takes them: compiled in the CEL
// environment that server allows new expressions (its previous minor's, so
// a rollback keeps them), and each policy type-checked against that
// release's own schemas (the OpenAPI it serves, from its module). A
// function or field a supported server lacks is a chart that server
// refuses, or a policy it marks with warnings.
func TestTheChartsCELHoldsOnEveryPinnedServer(t *testing.T) {
	h := helm4(t)
	for _, v := range pinnedKubeVersions(t) {
		t.Run(v.String(), func(t *testing.T) {
			objs := renderFor(t, h, v, everyExpression)
			// A server compiles a new expression in its previous minor's
			// environment.
			env := environment.MustBaseEnvSet(utilversion.MajorMinor(v.Major(), v.Minor()-1))
			checker := &validating.TypeChecker{
				SchemaResolver: newServedSchemas(filepath.Join(moduleDir(t, "k8s.io/kubernetes@v"+v.String()), "api", "openapi-spec", "v3")),
				RestMapper:     builtInRESTMapper(),
			}
			policies := 0
			for _, u := range objs {
				switch u.GetKind() {
				case "ValidatingAdmissionPolicy":
					var p admissionregistrationv1.ValidatingAdmissionPolicy
					objs.get(t, u.GetKind(), u.GetName(), &p)
					policies++
					assert.Empty(t, compilePolicy(env, &p), "%s compiles on %s", p.Name, v)
					assert.Empty(t, typeCheck(checker, &p), "%s type-checks against the schemas of %s", p.Name, v)
				case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
					var c struct {
						Webhooks []struct {
							Name            string
							MatchConditions []admissionregistrationv1.MatchCondition
						}
					}
					require.NoError(t, json.Unmarshal(must(u.MarshalJSON()), &c))
					for _, w := range c.Webhooks {
						for _, mc := range w.MatchConditions {
							assert.NoError(t, compile(env, nil, mc.Expression), "%s: matchCondition %s compiles on %s", w.Name, mc.Name, v)
						}
					}
				}
			}
			assert.NotZero(t, policies, "the chart renders its policies")
		})
	}
}

// everyExpression are values that render every optional expression and
// rule: every preset, exempt principals (the default), trusted controllers.
const everyExpression = `presets:
  enabled: [arc-scale-set, arc-workflow, arc-legacy, gitlab, generic]
  gitlab: {ownerPrincipals: [system:serviceaccount:ci:gitlab-runner]}
  arc-scale-set: {controllerPrincipals: [system:serviceaccount:arc-systems:arc-gha-rs-controller]}
  arc-legacy: {controllerPrincipals: [system:serviceaccount:actions-runner-system:actions-runner-controller]}
policy: {podGarbageCollectors: [system:serviceaccount:kube-system:pod-garbage-collector]}`

// renderFor renders the chart with values as Helm would for a server of
// version v.
func renderFor(t *testing.T, h helm, v *utilversion.Version, values string) objects {
	t.Helper()
	out, err := h.run("template", release, chartDir, "--namespace", namespace,
		"--kube-version", "v"+v.String(), "--values", writeValues(t, values))
	require.NoError(t, err, "helm template --kube-version %s", v)
	return parse(t, out)
}

// newerResources are the built-in resources the chart's rules name that
// an older supported server does not serve, and the minor that serves them
// first. A rule naming one matches nothing there, which is what the chart
// means.
var newerResources = map[string]struct {
	since *utilversion.Version
	why   string
}{
	"pods/resize": {utilversion.MajorMinor(1, 33), "before it a resize is an update of the pod, which the policy matches too"},
}

// Every built-in resource and subresource the chart's webhooks and
// policies name is served by every pinned server, but those newerResources
// lists, which are served exactly from their minor on: a rule for a
// subresource a server lacks is no error there, only a rule that never
// matches, so a new one must be meant.
func TestEveryResourceTheChartAdmitsIsServedByEveryPinnedServer(t *testing.T) {
	h := helm4(t)
	for _, v := range pinnedKubeVersions(t) {
		t.Run(v.String(), func(t *testing.T) {
			objs := renderFor(t, h, v, everyExpression)
			dir := filepath.Join(moduleDir(t, "k8s.io/kubernetes@v"+v.String()), "api", "openapi-spec", "v3")
			named := 0
			for _, r := range admissionRules(t, objs) {
				require.NotNil(t, r.Scope, "every rule names its scope")
				for _, gv := range groupVersions(r) {
					paths, builtIn := servedPaths(t, dir, gv)
					if !builtIn {
						continue // a custom resource's group
					}
					for _, res := range r.Resources {
						named++
						served := paths[pathOf(gv, *r.Scope, res)]
						if newer, ok := newerResources[res]; ok {
							assert.Equal(t, v.AtLeast(newer.since), served, "%s served from %s on (%s), on %s", res, newer.since, newer.why, v)
							continue
						}
						assert.True(t, served, "%s/%s is not served by %s", gv, res, v)
					}
				}
			}
			assert.NotZero(t, named, "the chart's rules name built-in resources")
		})
	}
}

// admissionRules are the rules of every webhook and policy in objs.
func admissionRules(t *testing.T, objs objects) []admissionregistrationv1.Rule {
	t.Helper()
	var rules []admissionregistrationv1.Rule
	webhook := func(rs []admissionregistrationv1.RuleWithOperations) {
		for _, r := range rs {
			rules = append(rules, r.Rule)
		}
	}
	for _, u := range objs {
		switch u.GetKind() {
		case "ValidatingWebhookConfiguration":
			var c admissionregistrationv1.ValidatingWebhookConfiguration
			objs.get(t, u.GetKind(), u.GetName(), &c)
			for _, w := range c.Webhooks {
				webhook(w.Rules)
			}
		case "MutatingWebhookConfiguration":
			var c admissionregistrationv1.MutatingWebhookConfiguration
			objs.get(t, u.GetKind(), u.GetName(), &c)
			for _, w := range c.Webhooks {
				webhook(w.Rules)
			}
		case "ValidatingAdmissionPolicy":
			var p admissionregistrationv1.ValidatingAdmissionPolicy
			objs.get(t, u.GetKind(), u.GetName(), &p)
			for _, r := range p.Spec.MatchConstraints.ResourceRules {
				rules = append(rules, r.RuleWithOperations.Rule)
			}
		}
	}
	return rules
}

// groupVersions are the group versions r names.
func groupVersions(r admissionregistrationv1.Rule) []schema.GroupVersion {
	var gvs []schema.GroupVersion
	for _, g := range r.APIGroups {
		for _, v := range r.APIVersions {
			gvs = append(gvs, schema.GroupVersion{Group: g, Version: v})
		}
	}
	return gvs
}

// servedPaths are the paths of gv's OpenAPI document in dir, and whether
// the release serves gv at all.
func servedPaths(t *testing.T, dir string, gv schema.GroupVersion) (map[string]bool, bool) {
	t.Helper()
	file := "api__" + gv.Version + "_openapi.json"
	if gv.Group != "" {
		file = "apis__" + gv.Group + "__" + gv.Version + "_openapi.json"
	}
	b, err := os.ReadFile(filepath.Join(dir, file))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false
	}
	require.NoError(t, err)
	var doc struct{ Paths map[string]json.RawMessage }
	require.NoError(t, json.Unmarshal(b, &doc))
	paths := map[string]bool{}
	for p := range doc.Paths {
		paths[p] = true
	}
	return paths, true
}

// pathOf is the path a server serves one object of resource (resource or
// resource/subresource) of gv at.
func pathOf(gv schema.GroupVersion, scope admissionregistrationv1.ScopeType, resource string) string {
	p := "/api/" + gv.Version
	if gv.Group != "" {
		p = "/apis/" + gv.Group + "/" + gv.Version
	}
	if scope == admissionregistrationv1.NamespacedScope {
		p += "/namespaces/{namespace}"
	}
	res, sub, _ := strings.Cut(resource, "/")
	p += "/" + res + "/{name}"
	if sub != "" {
		p += "/" + sub
	}
	return p
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// writeValues writes values to a file for --values.
func writeValues(t *testing.T, values string) string {
	t.Helper()
	f := filepath.Join(valuesDir(t), "values.yaml")
	require.NoError(t, os.WriteFile(f, []byte(values), 0o600))
	return f
}

// expression is a CEL expression and the type it must evaluate to.
type expression struct {
	text    string
	returns *cel.Type
}

func (e expression) GetExpression() string    { return e.text }
func (e expression) ReturnTypes() []*cel.Type { return []*cel.Type{e.returns} }

// compile compiles a condition (a bool) as a server compiles a new one in
// env, with variables (a policy's, compiled first) and the authorizer.
func compile(env *environment.EnvSet, variables []admissionregistrationv1.Variable, condition string) error {
	return compileAs(env, variables, expression{condition, cel.BoolType})
}

func compileAs(env *environment.EnvSet, variables []admissionregistrationv1.Variable, e expression) error {
	c, err := plugincel.NewCompositedCompiler(env)
	if err != nil {
		return err
	}
	opts := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
	var vars []plugincel.NamedExpressionAccessor
	for _, v := range variables {
		vars = append(vars, &validating.Variable{Name: v.Name, Expression: v.Expression})
	}
	c.CompileAndStoreVariables(vars, opts, environment.NewExpressions)
	if r := c.CompileCELExpression(e, opts, environment.NewExpressions); r.Error != nil {
		return r.Error
	}
	return nil
}

// compilePolicy is each failure of compile for p's expressions.
func compilePolicy(env *environment.EnvSet, p *admissionregistrationv1.ValidatingAdmissionPolicy) []string {
	var failed []string
	check := func(where string, e expression, variables []admissionregistrationv1.Variable) {
		if e.text == "" {
			return
		}
		if err := compileAs(env, variables, e); err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", where, err))
		}
	}
	for i, v := range p.Spec.Variables {
		check("variable "+v.Name, expression{v.Expression, cel.AnyType}, p.Spec.Variables[:i])
	}
	for _, mc := range p.Spec.MatchConditions {
		check("matchCondition "+mc.Name, expression{mc.Expression, cel.BoolType}, nil)
	}
	for i, v := range p.Spec.Validations {
		check(fmt.Sprintf("validation %d", i), expression{v.Expression, cel.BoolType}, p.Spec.Variables)
		check(fmt.Sprintf("validation %d's message", i), expression{v.MessageExpression, cel.StringType}, p.Spec.Variables)
	}
	return failed
}

// typeCheck is what a server's type checking would write in p's status:
// its validations' warnings and its variables' and matchConditions', which
// the status leaves out though a field they read is as missing.
func typeCheck(c *validating.TypeChecker, p *admissionregistrationv1.ValidatingAdmissionPolicy) []string {
	var warnings []string
	for _, w := range c.Check(p) {
		warnings = append(warnings, w.FieldRef+": "+w.Warning)
	}
	ctx := c.CreateContext(p)
	for _, v := range p.Spec.Variables {
		if r := c.CheckExpression(ctx, v.Expression); len(r) > 0 {
			warnings = append(warnings, "variable "+v.Name+": "+r.String())
		}
	}
	for _, mc := range p.Spec.MatchConditions {
		if r := c.CheckExpression(ctx, mc.Expression); len(r) > 0 {
			warnings = append(warnings, "matchCondition "+mc.Name+": "+r.String())
		}
	}
	return warnings
}

// builtInRESTMapper maps the built-in resources to their kinds, as a
// server's discovery does.
func builtInRESTMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for gvk := range scheme.Scheme.AllKnownTypes() {
		if gvk.Version == "__internal" || strings.HasSuffix(gvk.Kind, "List") || strings.HasSuffix(gvk.Kind, "Options") {
			continue
		}
		m.Add(gvk, meta.RESTScopeNamespace)
	}
	return m
}

// servedSchemas resolves a kind's schema from the OpenAPI v3 documents a
// release serves (api/openapi-spec/v3 in its source), as a server's type
// checking resolves them from its own; each kind once.
type servedSchemas struct {
	dir   string
	kinds map[schema.GroupVersionKind]*spec.Schema
}

func newServedSchemas(dir string) *servedSchemas {
	return &servedSchemas{dir: dir, kinds: map[schema.GroupVersionKind]*spec.Schema{}}
}

func (s *servedSchemas) ResolveSchema(gvk schema.GroupVersionKind) (*spec.Schema, error) {
	if sch, ok := s.kinds[gvk]; ok {
		return sch, nil
	}
	sch, err := s.resolve(gvk)
	if err == nil {
		s.kinds[gvk] = sch
	}
	return sch, err
}

func (s *servedSchemas) resolve(gvk schema.GroupVersionKind) (*spec.Schema, error) {
	file := "api__" + gvk.Version + "_openapi.json"
	if gvk.Group != "" {
		file = "apis__" + gvk.Group + "__" + gvk.Version + "_openapi.json"
	}
	b, err := os.ReadFile(filepath.Join(s.dir, file))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%v: %w", gvk, resolver.ErrSchemaNotFound)
	}
	if err != nil {
		return nil, err
	}
	var doc struct {
		Components struct {
			Schemas map[string]*spec.Schema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	for name, sch := range doc.Components.Schemas {
		var gvks []schema.GroupVersionKind
		if err := sch.Extensions.GetObject("x-kubernetes-group-version-kind", &gvks); err != nil {
			return nil, err
		}
		if slices.Contains(gvks, gvk) {
			return resolver.PopulateRefs(func(ref string) (*spec.Schema, bool) {
				sch, ok := doc.Components.Schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
				return sch, ok
			}, name)
		}
	}
	return nil, fmt.Errorf("%v: %w", gvk, resolver.ErrSchemaNotFound)
}
