// Package testfleet starts fleets of real control planes (kube-apiserver and
// etcd, through controller-runtime's envtest) for this repository's tests.
//
// Control planes of one fleet start in parallel. The binaries come from
// KUBEBUILDER_ASSETS when it holds kube-apiserver and etcd; otherwise
// hack/envtest-assets.sh builds (or reuses its cached build of) them, so a plain
// `go test` works as well as `make test`.
//
// A package whose tests can share members starts one fleet in TestMain and hands
// it to every test; tests that stop or break members start their own.
package testfleet
