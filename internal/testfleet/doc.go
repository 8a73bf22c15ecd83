// Package testfleet is this repository's entry to the public test kit
// (pkg/fleettest): the same fleets, except that when KUBEBUILDER_ASSETS does
// not name the control-plane binaries it provisions them with
// hack/envtest-assets.sh, so that a plain `go test` works as well as
// `make test`.
package testfleet
