// Package config holds the one configuration of runnerguard's webhooks:
// presets, exempt and owner principals, and what the injector adds. Default
// gives a working configuration, Load reads the file the chart renders over
// it, and Validate says precisely what is wrong.
package config
