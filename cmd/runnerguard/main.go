// Command runnerguard serves the guard and injection webhooks and the pod
// watcher, and tells operators how a runner died.
//
//	runnerguard serve --config=/etc/runnerguard/config.yaml --cert-dir=DIR
//	runnerguard why POD [-n NAMESPACE] [-o json]
//	runnerguard deaths [-n NAMESPACE | -A] [--since 24h] [-o wide|json]
package main

import (
	"fmt"
	"os"
)

const usage = `usage: runnerguard <command> [flags]

Commands:
  serve   serve the guard (validating) and inject (mutating) webhooks and the pod watcher
  why     show how a runner pod's runner died: runnerguard why POD [-n NAMESPACE] [-o json]
  deaths  what kills the runners: counts by class and recent records: runnerguard deaths [-n NAMESPACE | -A] [--since 24h] [-o wide|json]
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "why":
		err = why(os.Args[2:], os.Stdout)
	case "deaths":
		err = deaths(os.Args[2:], os.Stdout)
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "runnerguard:", err)
		os.Exit(1)
	}
}
