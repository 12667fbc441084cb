package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
	"k8s.io/apimachinery/pkg/util/validation"
)

// validatePresets checks that the presets are known, listed once, and each
// enabled one complete. None enabled is valid: the webhooks then act on no
// pod, as a plain install does until its fleets are chosen.
func validatePresets(c Config) []error {
	var errs []error
	seen := map[runnerpod.PresetName]bool{}
	for _, p := range c.Presets {
		if !presets.Known(p.Name) {
			errs = append(errs, fmt.Errorf("presets: unknown preset %q (known: %v)", p.Name, presets.Order))
			continue
		}
		if seen[p.Name] {
			errs = append(errs, fmt.Errorf("presets: %q listed twice", p.Name))
		}
		seen[p.Name] = true
		if p.Enabled {
			errs = append(errs, validatePreset(p)...)
		}
	}
	return errs
}

// containerPatternErrors checks a runner container's name, or a prefix
// and runnerpod.AnyRest: a prefix must begin a valid name and may not be
// empty, so no pattern takes every container of every pod.
func containerPatternErrors(n string) []string {
	prefix, ok := strings.CutSuffix(n, runnerpod.AnyRest)
	if !ok {
		return validation.IsDNS1123Label(n)
	}
	if prefix == "" {
		return []string{"a prefix before " + runnerpod.AnyRest + " is required: alone it would take every pod's containers"}
	}
	if strings.Contains(prefix, runnerpod.AnyRest) {
		return []string{runnerpod.AnyRest + " may only end the name"}
	}
	return validation.IsDNS1123Label(prefix + "x")
}

// validatePreset checks one enabled preset.
func validatePreset(p runnerpod.Preset) []error {
	var errs []error
	if len(p.RunnerContainers) == 0 {
		errs = append(errs, fmt.Errorf("presets[%s].runnerContainers: must name at least one container", p.Name))
	}
	for _, n := range p.RunnerContainers {
		for _, msg := range containerPatternErrors(n) {
			errs = append(errs, fmt.Errorf("presets[%s].runnerContainers: %q: %s", p.Name, n, msg))
		}
	}
	if p.MaxProtected.Duration < time.Minute {
		errs = append(errs, fmt.Errorf("presets[%s].maxProtected: %s is below the 1m floor", p.Name, p.MaxProtected.Duration))
	}
	owner := presets.OwnerOf(p.Name)
	if len(p.OwnerPrincipals) > 0 && !owner.EndsJob {
		errs = append(errs, fmt.Errorf("presets[%s].ownerPrincipals: only the presets whose owner ends the job by deleting its pod (%s) have owners", p.Name, ownerPresets(func(o fleet.Owner) bool { return o.EndsJob })))
	}
	if p.OwnerInRunnerNamespace && !owner.InRunnerNamespace {
		// A runner that proves itself with its own pod's bound token
		// (arc-workflow) is never replaced by a name alone; other presets
		// have no owner.
		errs = append(errs, fmt.Errorf("presets[%s].ownerInRunnerNamespace: only the presets whose job's owner may run in the runner namespace (%s) take it", p.Name, ownerPresets(func(o fleet.Owner) bool { return o.InRunnerNamespace })))
	}
	if slices.Contains(p.OwnerPrincipals, "") {
		errs = append(errs, fmt.Errorf("presets[%s].ownerPrincipals: principals must not be empty strings", p.Name))
	}
	errs = append(errs, validateJobKeys(p)...)
	for _, e := range p.DiagnosticEnv {
		for _, msg := range validation.IsEnvVarName(e.Name) {
			errs = append(errs, fmt.Errorf("presets[%s].diagnosticEnv: %q: %s", p.Name, e.Name, msg))
		}
		if e.ValueFrom != nil {
			errs = append(errs, fmt.Errorf("presets[%s].diagnosticEnv: %q: only literal values are supported", p.Name, e.Name))
		}
	}
	return errs
}

// validateJobKeys: each job key names one of a label, an annotation or an
// env var, by a valid key (an env var's annotation too: the injector
// copies it there).
func validateJobKeys(p runnerpod.Preset) []error {
	var errs []error
	keys := map[string]runnerpod.PodKey{"id": p.Job.ID, "project": p.Job.Project, "name": p.Job.Name, "url": p.Job.URL,
		"commit": p.Job.Commit, "forge": p.Job.Forge, "repositoryID": p.Job.RepositoryID}
	for field, k := range keys {
		named := 0
		for _, s := range []string{k.Label, k.Annotation, k.Env} {
			if s != "" {
				named++
			}
		}
		if named > 1 {
			errs = append(errs, fmt.Errorf("presets[%s].job.%s: name one of a label, an annotation or an env var", p.Name, field))
		}
		for _, key := range []string{k.Label, k.Annotation} {
			if key == "" {
				continue
			}
			for _, msg := range validation.IsQualifiedName(key) {
				errs = append(errs, fmt.Errorf("presets[%s].job.%s: %q: %s", p.Name, field, key, msg))
			}
		}
		if k.Env != "" {
			for _, msg := range append(validation.IsEnvVarName(k.Env), validation.IsQualifiedName(runnerpod.EnvAnnotation(k.Env))...) {
				errs = append(errs, fmt.Errorf("presets[%s].job.%s: env %q: %s", p.Name, field, k.Env, msg))
			}
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errs
}

// ownerPresets names, comma-separated, the presets whose fleet's owner is
// as want says.
func ownerPresets(want func(fleet.Owner) bool) string {
	var names []string
	for _, f := range presets.All {
		if want(f.Traits().Owner) {
			names = append(names, string(f.Name()))
		}
	}
	return strings.Join(names, ", ")
}
