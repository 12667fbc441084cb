module gitlab.com/gitlab-org/gitlab-runner/helpers/runner_wrapper/api

go 1.24

require github.com/sirupsen/logrus v1.10.0
