package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Load reads a YAML or JSON config file over Default. A preset listed in
// the file replaces the default preset of that name whole; presets not
// listed keep their defaults. Unknown fields are an error, so a typo is not
// silently ignored. The result is validated.
func Load(path string) (Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("reading config: %w", err)
	}
	return Parse(raw)
}

// Parse is Load on bytes.
func Parse(raw []byte) (Config, error) {
	cfg := Default()
	defaults := cfg.Presets
	cfg.Presets = nil
	// Decoding over the defaults merges maps key by key, so a file could
	// never remove a default annotation or resource limit: a map the file
	// sets replaces the default whole.
	var given struct {
		Guard struct {
			OwnerPrincipals *json.RawMessage `json:"ownerPrincipals"`
		} `json:"guard"`
		Inject struct {
			PodAnnotations *json.RawMessage `json:"podAnnotations"`
			Vitals         struct {
				Resources *json.RawMessage `json:"resources"`
			} `json:"vitals"`
		} `json:"inject"`
	}
	if err := yaml.Unmarshal(raw, &given); err != nil {
		return Config{}, fmt.Errorf("parsing config: %w", err)
	}
	if given.Guard.OwnerPrincipals != nil {
		return Config{}, errors.New("guard.ownerPrincipals was removed: set presets[].ownerPrincipals on the gitlab and arc-workflow presets")
	}
	if given.Inject.PodAnnotations != nil {
		cfg.Inject.PodAnnotations = nil
	}
	if given.Inject.Vitals.Resources != nil {
		cfg.Inject.Vitals.Resources = corev1.ResourceRequirements{}
	}
	if err := yaml.UnmarshalStrict(raw, &cfg); err != nil {
		return Config{}, fmt.Errorf("parsing config: %w", err)
	}
	seen := map[runnerpod.PresetName]bool{}
	for _, p := range cfg.Presets {
		if seen[p.Name] {
			return Config{}, fmt.Errorf("presets: %q listed twice", p.Name)
		}
		seen[p.Name] = true
	}
	cfg.Presets = mergePresets(defaults, cfg.Presets)
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// mergePresets replaces defaults by name and keeps presets.Order, so
// matching stays most-specific-first whatever order the file lists. A listed
// preset without maxProtected gets its fleet's default cap: protection never
// goes uncapped by omission; one without job keys, its fleet's.
func mergePresets(defaults, given []runnerpod.Preset) []runnerpod.Preset {
	out := slices.Clone(defaults)
	for _, g := range given {
		if f, ok := presets.For(g.Name); ok {
			if g.MaxProtected.Duration == 0 {
				g.MaxProtected = f.Defaults().MaxProtected
			}
			if g.Job == (runnerpod.JobKeys{}) {
				g.Job = f.Defaults().Job
			}
		}
		if i := slices.IndexFunc(out, func(p runnerpod.Preset) bool { return p.Name == g.Name }); i >= 0 {
			out[i] = g
		} else {
			out = append(out, g) // unknown: Validate reports it
		}
	}
	slices.SortStableFunc(out, func(a, b runnerpod.Preset) int {
		return slices.Index(presets.Order, a.Name) - slices.Index(presets.Order, b.Name)
	})
	return out
}

// Validate reports every problem in the configuration at once.
func (c Config) Validate() error {
	var errs []error
	for _, check := range []func(Config) []error{validatePresets, validatePrincipals, validateInject, validateGuard, validateRecords, validateReports} {
		errs = append(errs, check(c)...)
	}
	return errors.Join(errs...)
}

// validatePrincipals refuses empty principal names anywhere: an empty
// username would match no one in CEL but reads as a wildcard to a person.
func validatePrincipals(c Config) []error {
	principals := slices.Concat(c.Guard.ExemptPrincipals, c.Policy.GarbageCollectors)
	for _, p := range c.Presets {
		principals = slices.Concat(principals, p.ControllerPrincipals, p.OwnerPrincipals)
	}
	if slices.Contains(principals, "") {
		return []error{errors.New("guard, policy, presets: principals must not be empty strings")}
	}
	return nil
}

func validateInject(c Config) []error {
	var errs []error
	for k := range c.Inject.PodAnnotations {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, fmt.Errorf("inject.podAnnotations: %q: %s", k, msg))
		}
	}
	// A mark the injector wrote at creation would be taken for the pod
	// author's, which the marker never changes: the pod would keep it idle.
	for k, on := range map[string]bool{runnerpod.KarpenterDoNotDisrupt: c.Marks.Karpenter, runnerpod.ClusterAutoscalerSafeEvict: c.Marks.ClusterAutoscaler, runnerpod.ClusterAutoscalerLocalVolumes: c.Marks.ClusterAutoscaler, runnerpod.Marked: true} {
		if _, ok := c.Inject.PodAnnotations[k]; ok && on {
			errs = append(errs, fmt.Errorf("inject.podAnnotations: %q is the leader's to write while the runner is busy (see marks): remove it, or turn its mark off", k))
		}
	}
	switch c.Inject.PodSecurityDefault {
	case "", PodSecurityPrivileged, PodSecurityBaseline, PodSecurityRestricted:
	default:
		errs = append(errs, fmt.Errorf("inject.podSecurityDefault: %q is not a Pod Security level (privileged, baseline or restricted)", c.Inject.PodSecurityDefault))
	}
	v := c.Inject.Vitals
	if !v.Enabled {
		return errs
	}
	errs = append(errs, validateResources(v.Resources)...)
	if v.Image == "" {
		errs = append(errs, errors.New("inject.vitals.image: required when the sidecar is enabled"))
	}
	if v.Interval.Duration < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("inject.vitals.interval: %s is below the 100ms floor", v.Interval.Duration))
	}
	if v.CgroupHostPath == "" || v.CgroupHostPath[0] != '/' {
		errs = append(errs, fmt.Errorf("inject.vitals.cgroupHostPath: %q must be an absolute path", v.CgroupHostPath))
	}
	if v.MountPath == "" || v.MountPath[0] != '/' {
		errs = append(errs, fmt.Errorf("inject.vitals.mountPath: %q must be an absolute path", v.MountPath))
	}
	if p := v.ProbePort; p != 0 && (p < 1024 || p > 65535) {
		errs = append(errs, fmt.Errorf("inject.vitals.probePort: %d is neither 0 (no probe) nor a port from 1024 to 65535 (the sidecar runs as non-root)", p))
	}
	return errs
}

func validateGuard(c Config) []error {
	var errs []error
	if m := c.Guard.Mode; m != ModeEnforce && m != ModeWarn {
		errs = append(errs, fmt.Errorf("guard.mode: %q is neither %q nor %q", m, ModeEnforce, ModeWarn))
	}
	if d := c.Guard.EndZombiesAfter.Duration; d < 0 {
		errs = append(errs, fmt.Errorf("guard.endZombiesAfter: %s is negative (0 never ends a zombie)", d))
	}
	if slices.Contains(c.Guard.ZombieReapers, "") {
		errs = append(errs, errors.New("guard.zombieReapers: principals must not be empty strings"))
	}
	return errs
}

func validateRecords(c Config) []error {
	var errs []error
	if r := c.Records; r.MaxAge.Duration < time.Hour || r.CleanMaxAge.Duration < 0 || r.CleanMaxAge.Duration > r.MaxAge.Duration {
		errs = append(errs, fmt.Errorf("records: maxAge %s must be at least 1h, and cleanMaxAge %s between 0 (not kept) and maxAge", r.MaxAge.Duration, r.CleanMaxAge.Duration))
	}
	if r := c.Records; r.MaxPerNamespace < 0 || r.CollectInterval.Duration < time.Second {
		errs = append(errs, fmt.Errorf("records: maxPerNamespace %d must be 0 (no limit) or more, and collectInterval %s at least 1s", r.MaxPerNamespace, r.CollectInterval.Duration))
	}
	return errs
}

// validateResources checks the sidecar's resources: a request above its
// limit would get every instrumented pod refused by the API server.
func validateResources(r corev1.ResourceRequirements) []error {
	var errs []error
	for name, req := range r.Requests {
		if lim, ok := r.Limits[name]; ok && req.Cmp(lim) > 0 {
			errs = append(errs, fmt.Errorf("inject.vitals.resources.requests.%s: %s is above its limit %s", name, req.String(), lim.String()))
		}
	}
	return errs
}
