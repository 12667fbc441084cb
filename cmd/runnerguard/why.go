package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/webhook/config"
	"github.com/runnerguard/runnerguard/webhook/death"
)

// why prints the death records of one pod, alive or gone.
func why(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("why", flag.ContinueOnError)
	namespace := fs.String("n", "", "namespace (default: the kubeconfig context's)")
	fs.StringVar(namespace, "namespace", "", "namespace (default: the kubeconfig context's)")
	output := fs.String("o", "text", "output: text or json")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: as kubectl finds it)")
	configPath := fs.String("config", "", "runnerguard config file, for non-default presets")
	// Go's flag package stops at the first positional argument; take the
	// pod name wherever it stands, as kubectl does.
	var pod string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		if pod != "" {
			return errors.New("usage: runnerguard why POD [-n NAMESPACE] [-o json]")
		}
		pod, rest = fs.Arg(0), fs.Args()[1:]
	}
	if pod == "" {
		return errors.New("usage: runnerguard why POD [-n NAMESPACE] [-o json]")
	}
	if *output != "text" && *output != "json" {
		return fmt.Errorf("-o %q: want text or json", *output)
	}
	cfg := config.Default()
	if *configPath != "" {
		var err error
		if cfg, err = config.Load(*configPath); err != nil {
			return err
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	kc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	if *namespace == "" {
		ns, _, err := kc.Namespace()
		if err != nil {
			return err
		}
		*namespace = ns
	}
	restCfg, err := kc.ClientConfig()
	if err != nil {
		return err
	}
	c, err := client.New(restCfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := death.Lookup(ctx, c, cfg.Presets, *namespace, pod)
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
