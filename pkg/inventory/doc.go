// Package inventory is the kit that inventory providers are built on: a
// provider whose clusters are described by objects on the host cluster
// (kubeconfig Secrets, Cluster API Clusters, ClusterProfiles, ...) supplies
// only what is specific to its source of truth — which objects to read, and
// what one object asks for (a cluster name and how to reach it) — and the kit
// does the rest once for every provider:
//
//   - a cache of its own on the host cluster, limited to the provider's
//     namespaces and selectors, started with the manager's caches;
//   - a host controller that runs on every replica (no leader election: every
//     replica needs the fleet);
//   - the start guard and the gate that holds reconciles until the provider
//     runs and has listed the objects present at start-up;
//   - publishing each wanted cluster to the fleet engine, which builds, starts,
//     engages, probes, replaces and tears it down (see pkg/fleet), and
//     withdrawing it when its object goes or stops asking for it;
//   - one name, one source: a name two objects (or two listed entries) ask
//     for belongs to the first, and the other waits until it lets go;
//   - Events on the source object from the engine's reports, with shared
//     reasons, and problems only a change of the object can fix reported once
//     per change, not in a retry loop;
//   - readiness: Listed is closed once every object present at start-up has
//     been considered.
//   - pause by annotation: an object annotated PausedAnnotation "true" has
//     its cluster paused, never rebuilt (Desired.Paused);
//   - the object reaches the manager's settings hook
//     (mcmanager.WithClusterSettings) when its cluster is built, and
//     Options.HealthCheck joins the manager's probes of the kit's clusters.
//
// An inventory that is not objects on the host (the local kind clusters,
// kubeconfig files) gives Options.List instead: the kit lists it every
// Interval, or whenever its Options.Watch says it changed, and publishes and
// withdraws what it lists the same way.
//
// A provider embeds *Kit[T], which gives it the multicluster.Provider and
// ProviderRunnable methods, Listed and SetupWithManager. The contributor
// guide's "Write a provider" page builds a complete one.
package inventory
