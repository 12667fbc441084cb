// Command certmanager runs cert-manager's real controllers and its CA
// injector from cert-manager's own packages, for the node cluster of the e2e
// harness. cert-manager's binary modules are not on the Go module proxy; its
// main module, which holds the controllers, is. This is a separate module so
// that cert-manager's dependency versions never touch runnerguard's go.mod.
//
//	certmanager --kubeconfig=FILE [--namespace=cert-manager]
package main
