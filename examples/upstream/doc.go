// Package upstream holds one program per example of the upstream
// multi-cluster design (sigs.k8s.io/multicluster-runtime), written here with
// exactly the upstream names: each would build from an upstream program with
// only the import prefix changed. upstream_test.go and inventory_test.go build
// them and run them against real control planes. The kind and Cluster API
// programs live in their providers' modules (providers/kind/examples/upstream,
// providers/cluster-api/examples/upstream), whose tests run them
// (TestUpstreamKindExample, TestUpstreamCAPIExample).
//
// Package shapes (examples/upstream/shapes) compiles upstream's call shape of
// every name whose signature differed here until issue 41, and runs the calls
// that need no API server.
//
// The programs log through funcr to stderr where upstream's log through zap:
// the logger is controller-runtime's choice, not this library's, and this
// module does not depend on zap.
package upstream
