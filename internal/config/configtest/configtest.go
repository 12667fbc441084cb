// Package configtest holds the config the tests judge against. Never
// imported by production code.
package configtest

import (
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/fleet/arclegacy"
)

// Enforcing is the default config with every preset on and the guard in
// enforce: every fleet's pods are runner pods and a busy one is refused,
// the shape a test of the guard's rules starts from (a plain install has
// no preset on and warns). Legacy ARC names its controller, as an install
// with that preset must (the chart refuses it without).
func Enforcing() config.Config {
	c := config.Default()
	for i := range c.Presets {
		c.Presets[i].Enabled = true
		if c.Presets[i].Name == arclegacy.Name {
			c.Presets[i].ControllerPrincipals = []string{arclegacy.Controller}
		}
	}
	c.Guard.Mode = config.ModeEnforce
	return c
}
