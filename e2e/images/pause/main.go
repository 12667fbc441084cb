// Command pause is the pod sandbox process: it holds the pod's namespaces
// and does nothing until it is told to stop. No registry is reachable from
// the development machine, so the node runs this instead of registry.k8s.io/pause.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
