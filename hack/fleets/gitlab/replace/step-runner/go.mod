module gitlab.com/gitlab-org/step-runner

go 1.24

require (
	gitlab.com/gitlab-org/moa v0.0.0-20260427132849-fad5ad756fe7
	google.golang.org/protobuf v1.36.12
)

replace gitlab.com/gitlab-org/moa => ../moa
