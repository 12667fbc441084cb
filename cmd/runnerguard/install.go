package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerguard/runnerguard/internal/check"
	"github.com/runnerguard/runnerguard/internal/config"
)

// installFlags are how every command that needs runnerguard's installation
// finds it, one way for all: from the cluster (check.Find), with --release
// and --runnerguard-namespace to choose when it has several. They are not
// -n, which names the pods' namespace as kubectl's does.
type installFlags struct {
	release, namespace string
	// configPath: the presets from a local file instead (--config), on
	// the commands that tell runner pods by them.
	configPath string
}

// The flags' names, which the convention test holds every command to.
const (
	releaseFlag   = "release"
	namespaceFlag = "runnerguard-namespace"
	configFlag    = "config"
)

// newInstallFlags adds the flags that find the installation to cmd;
// presets adds --config, for the commands that tell runner pods by them.
func newInstallFlags(cmd *cobra.Command, presets bool) *installFlags {
	in := &installFlags{}
	cmd.Flags().StringVar(&in.release, releaseFlag, "", "runnerguard's Helm release, when the cluster has several (default: the only one)")
	cmd.Flags().StringVar(&in.namespace, namespaceFlag, "", "the namespace runnerguard is installed in, when the cluster has several installations (default: the only one)")
	if presets {
		cmd.Flags().StringVar(&in.configPath, configFlag, "", "runnerguard config file whose presets tell runner pods, instead of the installation's ConfigMap")
	}
	return in
}

// presets is the config the cluster's runnerguard runs, as far as the CLI
// can learn it: --config when given; else the installation's ConfigMap
// (key config.yaml), which the webhooks run; else every preset's
// defaults. The second result says which. Several installations without
// --release is an error: the presets would be a guess.
func (in *installFlags) presets(ctx context.Context, cs kubernetes.Interface) (config.Config, string, error) {
	if in.configPath != "" {
		cfg, err := config.Load(in.configPath)
		return cfg, "presets from " + in.configPath, err
	}
	found, err := check.Find(ctx, cs, in.release, in.namespace)
	var none check.NotInstalledError
	switch {
	case errors.As(err, &none) || apierrors.IsForbidden(err):
		// Not knowing which fleets the cluster runs, every preset's pods
		// are told for runner pods: drain would otherwise hand a runner
		// taken for a plain pod to kubectl's rules and evict it with its
		// job.
		return allPresets(), fmt.Sprintf("every preset's defaults: the installation could not be found (%s); pass --config if the cluster's presets differ", reasonOf(err)), nil
	case err != nil:
		return config.Config{}, "", err
	}
	cm, err := cs.CoreV1().ConfigMaps(found.Namespace).Get(ctx, found.Name, metav1.GetOptions{})
	if err != nil {
		return allPresets(), fmt.Sprintf("every preset's defaults: the installation's ConfigMap %s/%s could not be read (%s); pass --config if the cluster's presets differ", found.Namespace, found.Name, reasonOf(err)), nil
	}
	cfg, err := config.Parse([]byte(cm.Data["config.yaml"]))
	if err != nil {
		return config.Config{}, "", fmt.Errorf("the installation's ConfigMap %s/%s: %w", found.Namespace, found.Name, err)
	}
	return cfg, fmt.Sprintf("presets from the installation's ConfigMap %s/%s", found.Namespace, found.Name), nil
}

func reasonOf(err error) string {
	var none check.NotInstalledError
	if errors.As(err, &none) {
		return none.Looked
	}
	if r := apierrors.ReasonForError(err); r != metav1.StatusReasonUnknown {
		return string(r)
	}
	return err.Error()
}
