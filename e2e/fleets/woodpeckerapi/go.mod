module github.com/runnerguard/runnerguard/e2e/fleets/woodpeckerapi

go 1.26.0

require (
	github.com/oklog/ulid/v2 v2.1.2
	github.com/stretchr/testify v1.12.1
	go.woodpecker-ci.org/woodpecker/v3 v3.0.0-00010101000000-000000000000
	google.golang.org/grpc v1.83.1
)

require (
	github.com/cenkalti/backoff/v7 v7.0.0 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/rs/zerolog v1.35.1 // indirect
	github.com/urfave/cli/v3 v3.11.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/net v0.58.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260526163538-3dc84a4a5aaa // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

// The Go module proxy refuses Woodpecker's module: hack/fleets/woodpecker.sh
// exports its source here first.
replace go.woodpecker-ci.org/woodpecker/v3 => ../../../.cache/fleets/woodpecker/src
