// Package systemmodel holds the whole-system model checker (its tests):
// two or three replicas, each a real fleet engine (pkg/fleet) running the
// providers themselves — the namespace provider, providers/clusters,
// pkg/clusters.Clusters[T] with the manager and with an Aware that is not
// the manager, pkg/clusters.Members with a Build of the provider's own, and
// the multi provider over a providers/clusters — under sharding, through
// random schedules of: members added and removed (some whose clusters never
// start, some whose caches are slow to sync or builds slow to finish),
// ownership handed from replica to replica, fences lost to renewal lapses,
// a replica's host out (its fences lapse, it cannot acquire any), a fence
// service whose Acquire blocks, probes that answer healthy, failing, 401
// or slowly, pause and resume, indexes registered with each provider at
// random moments, and subscribers added late; one seed in four runs the
// engines with probing disabled.
//
// Fake clusters stand in for the members (the defects between the providers
// and the engine need no API server); TestSystemOnAPIServers runs a smaller
// schedule on real API servers (envtest), where one member reaches its API
// server with a ServiceAccount's token, rotated in turn to a token the
// member rejects (the cluster engaged with the working token keeps
// answering reads and stays engaged) and to a fresh valid one; two members
// reach their API server through a proxy that counts connections, published
// again at each of their turns (at most 3 connections open at each quiet
// period: they share the member's pooled connection), and one with a client
// certificate rotated in place at each of its turns; once they are removed,
// none of their connections is left open and no connection gate to their
// server is left in the process (looked into through internal/fleetpeek).
// TestPausedKeysOnAPIServers runs a manager's controller over two lent
// clusters, its requests sent through a channel source, through seeded
// rounds of a pause, keys sent once or twice while paused (some held, some
// still queued at the resume) and the resume: each key of a round is
// reconciled exactly once after the resume, none before.
//
// # Invariants
//
// Checked while the schedule runs:
//
//   - no fence is taken by a replica more than a grace period (1 s) after
//     the cluster was handed to another: an ownership change cancels the
//     fence's Acquire in flight;
//   - no subscriber of a replica is engaged with a cluster handed to another
//     replica more than the grace period before: an ownership change cancels
//     the start in flight (build, cache sync);
//   - Add (providers/clusters, Clusters[T] with the manager or with its own
//     Aware, the multi provider's inner provider) returns its own outcome:
//     a cluster that cannot start, on the replica that owns it throughout
//     the call, is not reported added; a healthy one is never refused.
//
// Checked after each quiet period (every server answers, no fence blocked,
// no host out), within a bound:
//
//   - every member that is wanted on a replica, owned by it and answering is
//     engaged there, for every provider kind: the engine's Get, every
//     subscriber and the provider's own Get answer the same cluster (a
//     pre-built cluster that left the replica, handed away or its fence
//     lost, is engaged again when it comes back);
//   - every Add has returned: at once when the cluster is owned elsewhere,
//     else with its outcome (even when the cluster was handed away while
//     it waited for its fence);
//   - a replica that does not own a cluster does not run it (StateWanted)
//     nor hold its fence; a fence is held only by the owner;
//   - every index registered with a provider reaches every cluster of that
//     provider engaged, whenever it was registered;
//   - a member removed leaves nothing on any replica: no record, no fence,
//     no subscriber holding it;
//   - with probing disabled, the engines' probe queues are empty (looked
//     into through internal/fleetpeek): nothing would ever take an entry;
//
// and once every member is removed, no cluster runs, no entry is left in
// any probe queue and no per-cluster metric series is left; once the
// replicas stopped, (goleak, TestMain) no goroutine is left.
//
// A failing seed prints itself, the schedule's last steps, the engines' last
// log lines and the command line that reruns it alone:
//
//	go test -race -count=1 -run 'TestSystem$' ./internal/systemmodel/ -systemmodel.seed=N -systemmodel.steps=M
//
// -systemmodel.soak runs many more seeds with long schedules.
package systemmodel
