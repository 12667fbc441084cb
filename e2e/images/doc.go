// Package images holds the sources of the images the node e2e suite and the
// demo run besides runnerguard's own: the pod sandbox (pause) and the runner
// stand-in. hack/node-images.sh builds them without a Docker engine.
package images
