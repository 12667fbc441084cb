package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/runnerguard/runnerguard/webhook/config"
	"github.com/runnerguard/runnerguard/webhook/death"
)

const whyUsage = "usage: runnerguard why POD [-n NAMESPACE] [-o text|json]"

// why prints the death records of one pod, alive or gone.
func why(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("why", flag.ContinueOnError)
	var kf kubeFlags
	kf.bind(fs)
	output := fs.String("o", "text", "output: text or json")
	configPath := fs.String("config", "", "runnerguard config file, for non-default presets")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New(whyUsage)
	}
	if *output != "text" && *output != "json" {
		return fmt.Errorf("-o %q: want text or json", *output)
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
	rep, err := death.Lookup(ctx, c, cfg.Presets, ns, pos[0])
	if err != nil {
		return err
	}
	if *output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	_, err = io.WriteString(out, rep.Text())
	return err
}
