package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// kube is what why and deaths read the cluster with: kubectl's own
// kubeconfig flags (--kubeconfig, --context, -n, --as, --request-timeout,
// ...), so a plugin user's habits and kubeconfig work unchanged.
type kube struct {
	flags *genericclioptions.ConfigFlags
}

func newKube(cmd *cobra.Command) kube {
	// No persistent config: each run of the CLI reads the kubeconfig once.
	k := kube{flags: genericclioptions.NewConfigFlags(false)}
	k.flags.AddFlags(cmd.Flags())
	_ = cmd.RegisterFlagCompletionFunc("namespace", k.completeNamespaces)
	_ = cmd.RegisterFlagCompletionFunc("context", k.completeContexts)
	return k
}

// scheme knows the pods and runnerguard's records, and names their kinds
// for the printers.
func scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, v1alpha1.AddToScheme(s)
}

// restConfig is the kubeconfig's client configuration, with kubectl's
// flags applied, or an error that says where a kubeconfig is looked for.
func (k kube) restConfig() (*rest.Config, error) {
	cfg, err := k.flags.ToRESTConfig()
	if clientcmd.IsEmptyConfig(err) || err == nil && k.noKubeconfig() {
		return nil, errNoKubeconfig
	}
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	return cfg, nil
}

var errNoKubeconfig = errors.New("no kubeconfig: runnerguard reads the cluster as kubectl does; pass --kubeconfig, set $KUBECONFIG, or write ~/.kube/config")

// noKubeconfig: no kubeconfig names a cluster, no --server is given and
// this is no pod in a cluster. kubectl's flags then fall back to
// localhost:8080, whose refused connection would say nothing useful.
func (k kube) noKubeconfig() bool {
	raw, err := k.flags.ToRawKubeConfigLoader().RawConfig()
	return err == nil && len(raw.Clusters) == 0 && *k.flags.APIServer == "" && os.Getenv("KUBERNETES_SERVICE_HOST") == ""
}

// namespace is -n, or the kubeconfig context's namespace.
func (k kube) namespace() (string, error) {
	ns, _, err := k.flags.ToRawKubeConfigLoader().Namespace()
	if clientcmd.IsEmptyConfig(err) {
		err = errNoKubeconfig
	}
	return ns, err
}

// client reads pods and runnerguard's records as the kubeconfig's user (or
// whom --as names: the API server authorizes the impersonation).
func (k kube) client() (client.Client, error) {
	cfg, err := k.restConfig()
	if err != nil {
		return nil, err
	}
	s, err := scheme()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: s})
}

// clientset is client-go's typed client of the kubeconfig.
func (k kube) clientset() (kubernetes.Interface, error) {
	cfg, err := k.restConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// presets are the presets in tells runner pods by, found as in.presets
// says; -v 1 shows where they came from.
func (k kube) presets(ctx context.Context, in *installFlags) ([]runnerpod.Preset, error) {
	cs, err := k.clientset()
	if err != nil {
		return nil, err
	}
	cfg, source, err := in.presets(ctx, cs)
	if err != nil {
		return nil, err
	}
	klog.V(1).Infof("runnerguard: %s", source)
	return cfg.Presets, nil
}

// completeNamespaces offers the cluster's namespaces for -n.
func (k kube) completeNamespaces(_ *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return k.names(prefix, func(ctx context.Context, c *corev1client.CoreV1Client) ([]string, error) {
		list, err := c.Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var names []string
		for _, ns := range list.Items {
			names = append(names, ns.Name)
		}
		return names, nil
	})
}

// completePods offers the pods of the namespace -n names.
func (k kube) completePods(_ *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ns, err := k.namespace()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return k.names(prefix, func(ctx context.Context, c *corev1client.CoreV1Client) ([]string, error) {
		list, err := c.Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var names []string
		for _, p := range list.Items {
			names = append(names, p.Name)
		}
		return names, nil
	})
}

// completeNodes offers the cluster's nodes not already named (drain takes
// several).
func (k kube) completeNodes(_ *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return k.names(prefix, func(ctx context.Context, c *corev1client.CoreV1Client) ([]string, error) {
		list, err := c.Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var names []string
		for _, n := range list.Items {
			if !slices.Contains(args, n.Name) {
				names = append(names, n.Name)
			}
		}
		return names, nil
	})
}

// names completes prefix from what list reads; nothing when the cluster
// cannot be read (a completion has nowhere to say why).
func (k kube) names(prefix string, list func(context.Context, *corev1client.CoreV1Client) ([]string, error)) ([]cobra.Completion, cobra.ShellCompDirective) {
	cfg, err := k.restConfig()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names, err := list(context.Background(), c)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return withPrefix(names, prefix), cobra.ShellCompDirectiveNoFileComp
}

// completeContexts offers the kubeconfig's contexts for --context.
func (k kube) completeContexts(_ *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
	raw, err := k.flags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for name := range raw.Contexts {
		names = append(names, name)
	}
	return withPrefix(names, prefix), cobra.ShellCompDirectiveNoFileComp
}

func withPrefix(names []string, prefix string) []cobra.Completion {
	var out []cobra.Completion
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
