// Package fleettest starts fleets of real control planes (kube-apiserver and
// etcd, through controller-runtime's envtest) for tests of multi-cluster
// controllers, and provides a Provider that engages a fleet's members.
//
// Control planes of one fleet start in parallel; each is a separate cluster
// with its own etcd, so an object created in one member is not seen by the
// others. The binaries come from Options.BinaryAssetsDirectory, else from
// $KUBEBUILDER_ASSETS (set it to the directory printed by controller-runtime's
// setup-envtest).
//
// A test starts its own fleet with New, which stops it when the test ends:
//
//	f := fleettest.New(t, 2)
//	p := fleettest.NewProvider(f, fleettest.ProviderOptions{})
//	mgr, err := mcmanager.New(f.Config(0), p, mcmanager.Options{})
//
// A package whose tests can share members starts one fleet for all of them in
// TestMain with RunMain, which also checks for leaked goroutines after the
// tests. Tests that stop or break members should start their own.
//
// A provider's test adds a Tracker to the manager: it records the clusters the
// provider engages, and ExpectEngaged waits until exactly the expected ones are
// engaged, each reaching the expected member (MarkMembers labels them).
// Eventually polls any other condition with a timeout. NewManager builds a
// Multi-Cluster Manager off fixed ports, RunManager runs it until the test
// ends, and a Recorder counts the requests a controller reconciles. AddUser gives a member
// another user with its own credentials, to test credential rotation or RBAC.
//
// Members are stopped with StopMember, which leaves their configs pointing at
// a dead endpoint: what an unreachable cluster looks like to a controller.
// For a member that fails and comes back, engage the members through their
// Faults (ProviderOptions.Faulty) and Cut, Blackhole, Slow or SilenceWatches
// one of them (Fleet.Faults), then Restore it.
package fleettest
