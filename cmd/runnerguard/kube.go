package main

import (
	"errors"
	"flag"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
)

// kubeFlags are the kubeconfig flags a kubectl user expects.
type kubeFlags struct {
	kubeconfig, context, namespace string
}

func (k *kubeFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "kubeconfig file (default: as kubectl finds it)")
	fs.StringVar(&k.context, "context", "", "kubeconfig context (default: the current one)")
	fs.StringVar(&k.namespace, "n", "", "namespace (default: the kubeconfig context's)")
	fs.StringVar(&k.namespace, "namespace", "", "namespace (default: the kubeconfig context's)")
}

// client returns a client that reads pods and runnerguard's records, and
// the namespace to read them in.
func (k *kubeFlags) client() (client.Client, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	kc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: k.context})
	ns := k.namespace
	if ns == "" {
		var err error
		if ns, _, err = kc.Namespace(); err != nil {
			return nil, "", err
		}
	}
	restCfg, err := kc.ClientConfig()
	if err != nil {
		return nil, "", err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, "", err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, "", err
	}
	c, err := client.New(restCfg, client.Options{Scheme: scheme})
	return c, ns, err
}

// parseInterspersed parses fs over args, taking positional arguments
// wherever they stand, as kubectl does (Go's flag package stops at the
// first one).
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %w", errUsage, err)
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos, rest = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
}
