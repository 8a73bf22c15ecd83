// Package testbed holds what only this repository's tests need beside the
// public test kit (pkg/fleettest): the control-plane binaries provisioned with
// hack/envtest-assets.sh, network faults (a TCP proxy that cuts or
// black-holes a cluster, an HTTP proxy that breaks one resource's lists and
// watches, an endpoint that never answers), goroutine accounting that ignores
// pooled connections, direct clients with create helpers, and a runner for
// the programs under examples/.
//
// It imports no package of this module, so that every package's tests can use
// it: what needs the module's own types (a manager, a recorder of reconcile
// requests, an engagement tracker) is in pkg/fleettest.
package testbed
