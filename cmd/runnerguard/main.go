// Command runnerguard serves the guard and injection webhooks and the pod
// watcher, and tells operators how a runner died.
//
//	runnerguard serve --config=/etc/runnerguard/config.yaml --cert-dir=DIR
//	runnerguard why POD [-n NAMESPACE] [-o json]
//	runnerguard version
package main

import (
	"fmt"
	"os"
)

const usage = `usage: runnerguard <command> [flags]

Commands:
  serve   serve the guard (validating) and inject (mutating) webhooks and the pod watcher
  why     show how a runner pod's runner died: runnerguard why POD [-n NAMESPACE] [-o json]
  version print the release, commit and build date
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
	case "version":
		err = printVersion(os.Stdout)
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "runnerguard:", err)
		os.Exit(1)
	}
}
