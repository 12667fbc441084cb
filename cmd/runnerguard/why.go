package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/report"
)

// why prints the death records of one pod, alive or gone.
func why(args []string, out io.Writer) error {
	fs := newFlagSet("why", "why POD [-n NAMESPACE] [-o text|json|yaml]", out)
	var kf kubeFlags
	kf.bind(fs)
	output := fs.String("o", "text", "output: text, json or yaml")
	configPath := fs.String("config", "", "runnerguard config file, for non-default presets")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: why POD [-n NAMESPACE] [-o text|json|yaml]", errUsage)
	}
	if *output != "text" && *output != "json" && *output != "yaml" {
		return fmt.Errorf("%w: -o %q: want text, json or yaml", errUsage, *output)
	}
	cfg := config.Default()
	if *configPath != "" {
		if cfg, err = config.Load(*configPath); err != nil {
			return err
		}
	}
	c, ns, err := kf.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := report.Lookup(ctx, c, cfg.Presets, ns, pos[0])
	if err != nil {
		return err
	}
	return write(out, *output, rep, rep.Text)
}

// write prints v as json or yaml, or text as text.
func write(out io.Writer, format string, v any, text func() string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = out.Write(b)
		return err
	}
	_, err := io.WriteString(out, text())
	return err
}
