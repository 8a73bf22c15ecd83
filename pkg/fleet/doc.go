// Package fleet is the engine that owns the lifecycle of every cluster of the
// fleet. The Multi-Cluster Manager runs one; everything that works per cluster
// (controllers, sources, users' multicluster.Aware runnables, GetCluster,
// readiness, metrics, sharding) reads or subscribes to its one record per
// cluster name.
//
// # States
//
//	wanted → admitted → starting → engaged ⇄ disconnected → gone
//
// A provider publishes a cluster (wanted); this replica admits it when it may
// run it (always, unless sharding assigns it elsewhere, then once it holds the
// cluster's fence); the engine builds and starts it and waits for its cache
// (starting); then engages it with every subscriber, all or nothing
// (engaged). Health probes that fail HealthOptions.FailureThreshold times in
// a row disconnect it: every subscriber lets go of it, GetCluster answers with
// an error matching both multicluster.ErrClusterNotConnected and
// multicluster.ErrClusterNotFound, and it is probed with capped exponential
// backoff until it answers, then built again, so that its initial list
// re-enqueues every object. A cluster that cannot be started is disconnected
// too, and retried. When its provider removes it, it is gone. Every
// transition is logged with the cluster's name and counted in
// multicluster_cluster_transitions_total; multicluster_clusters{state}
// counts the clusters in each state.
//
// # One kind of member
//
// Every cluster enters as a member: a name, a content hash and how to build
// it (SetMember); a new hash replaces the running cluster once the new one is
// engaged. What a provider or the application already runs is adapted at the
// door (door.go) into the same form: a pre-built cluster (Member.Cluster) is
// lent to the engine, which starts it once unless the application did; a
// cluster handed to Engage — the way in of providers written as the seeds
// describe — is lent as it is, its provider running it. From there the same
// code admits, fences, starts, probes, drains, hands off and tears down every
// member.
//
// A cluster the engine did not build is never stopped by it while its member
// is wanted: when it leaves this replica (handed to another, its fence lost)
// it is disengaged — every subscriber lets go of it, its reconciles drain
// before the fence is released — and it is engaged again when it comes back.
// A lent cluster the engine started stops when its member is removed or
// replaced, or the engine stops. The cost: its cache, and the watches on
// its server, keep running on a replica that does not own it. A provider
// that can build its clusters (the namespace provider's views of one shared
// cluster are cheap) publishes a Build instead, and its clusters are built
// and stopped like any member.
//
// # Construction below the engine
//
// Building a cluster (transports, the connection gate, the lazy REST
// mapper, credential rotation, the settings hook) is package build, below
// the engine, which calls down into it. A member published with a
// rest.Config (Member.Config) is built by the engine itself, from the
// connection its record holds across publications (connection.go): the
// endpoint, compared here and nowhere else; the credentials, which a new
// publication for the same endpoint rotates into the running cluster in
// place once the member accepts them; the expiry warning of its token. The
// Multi-Cluster Manager's cluster options and settings hook are the
// engine's own options (Options.ClusterOptions, Options.Settings), applied
// to those builds; a provider with a Build of its own asks the door it
// publishes to for them (ConstructionOf; the engine, the manager, OwnEngine
// and the multi provider's door are Constructors). Nothing the engine calls
// reaches back up into the manager, and no context value carries options.
// A provider's field indexes (Indexes) travel with its members: the engine
// applies them to each cluster before its cache starts, and one registered
// later reaches the clusters that run or start meanwhile.
//
// # One place per name
//
// Every wish about a name (published, removed, owned here, answering again)
// is written to its record and the name looked at; the work that calls out —
// building, starting, engaging, waiting for a fence, draining — runs one step
// at a time per name, in the goroutine that holds the name's turn, each step
// chosen by comparing what is wanted with what runs (steps.go), the way a
// controller reconciles a key. A step a newer wish makes pointless is
// cancelled; the steps that let go of a cluster always complete. Readers
// (Get, Hold, State, Snapshot, readiness, the probe scheduler) take no lock:
// they load the record's view, which the engine replaces whole on every
// change.
//
// # Draining
//
// Reconciles hold their cluster (Hold) while they run. Before a cluster's
// fence is released (removal, hand-off, fence loss, shutdown), the cluster is
// disengaged, its cache stopped (unless the engine did not build it, see
// above), and its reconciles in flight waited for,
// bounded by Options.DrainTimeout; an overrun is logged and counted. A
// reconcile of a cluster the engine let go of is never run unheld: Hold
// refuses it.
//
// # Health
//
// One scheduler probes every engaged cluster's /readyz (readable by every
// authenticated identity, so no RBAC is needed) each HealthOptions.Interval,
// on Options.MaxConcurrentProbes workers: no goroutine per cluster. It keeps
// the probes to come in a queue ordered by time, so that a round costs the
// probes due, not the size of the fleet. A healthy answer takes no lock but
// the queue's. An answer never cancels an engagement on its way. A 401 or 403
// asks the provider for fresh credentials at once (Member.Refresh).
//
// A probe also follows the data path: once /readyz answered, an engaged
// cluster whose every watch has received nothing, no event and no bookmark,
// for longer than HealthOptions.WatchSilence fails its probe with a
// *WatchSilentError, and is disconnected and engaged again (its watches
// restarted) after FailureThreshold such probes.
package fleet
