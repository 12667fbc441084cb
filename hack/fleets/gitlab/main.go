// Command gitlab-runner is GitLab Runner 19.4 with only what the real-fleet
// suite runs: the Kubernetes executor's manager (run, run-single) and the
// helper's read-logs, which the executor execs in the helper container.
// One binary serves as both the manager and the helper image's
// gitlab-runner-helper, so the suite compiles GitLab Runner once.
package main

import (
	"os"
	"path/filepath"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli"

	"gitlab.com/gitlab-org/gitlab-runner/commands"
	"gitlab.com/gitlab-org/gitlab-runner/commands/helpers"
	"gitlab.com/gitlab-org/gitlab-runner/common"
	"gitlab.com/gitlab-org/gitlab-runner/executors"
	"gitlab.com/gitlab-org/gitlab-runner/executors/kubernetes"
	"gitlab.com/gitlab-org/gitlab-runner/log"
	"gitlab.com/gitlab-org/gitlab-runner/network"

	_ "gitlab.com/gitlab-org/gitlab-runner/shells"
)

func main() {
	providers := executors.NewProviderRegistry(map[string]common.ExecutorProvider{
		common.ExecutorKubernetes: kubernetes.NewProvider(),
	})
	collector := network.NewAPIRequestsCollector()
	client := network.NewGitLabClient(
		network.WithAPIRequestsCollector(collector),
		network.WithCertificateDirectory(commands.GetDefaultCertificateDirectory()),
		network.WithExecutorProviderFunc(providers.GetByName),
	)
	app := cli.NewApp()
	app.Name = filepath.Base(os.Args[0])
	app.Version = common.AppVersion.ShortLine()
	app.Commands = []cli.Command{
		commands.NewRunCommand(client, collector, providers),
		commands.NewRunSingleCommand(client, providers),
		helpers.NewReadLogsCommand(),
	}
	log.ConfigureLogging(app)
	if err := app.Run(os.Args); err != nil {
		logrus.Fatal(err)
	}
}
