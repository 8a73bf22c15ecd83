// Package namespace provides a Provider that turns every Namespace of one API
// server into a virtual cluster named after it.
//
// A virtual cluster engages when its Namespace appears and disengages when the
// Namespace is deleted or starts terminating. Code written for a real cluster
// runs unchanged inside one: its namespaced objects appear in namespace
// "default" (VirtualNamespace), and every operation of its client, API reader,
// cache and event recorders is mapped into the backing namespace. Naming any
// other namespace inside a virtual cluster yields a NotFound error for that
// namespace, as on a cluster that does not have it. The client supports every
// verb of client.Client: Get, List (label and field selectors, MatchingFields
// on indexes), Create, Update, Patch (merge, JSON, strategic merge and
// server-side apply), Apply, Delete, DeleteAllOf, Status() and SubResource().
// Its event recorders drop, with an error log line and a count in
// multicluster_namespace_dropped_events_total, events about objects of other
// namespaces or cluster-scoped ones: those Events would land in a namespace
// that belongs to another virtual cluster.
//
// # One shared cache
//
// All virtual clusters share the cache of the cluster.Cluster given to New:
// whatever the number of namespaces, the API server sees one informer (one
// LIST and WATCH) per watched type. Each shared informer carries one event
// handler that dispatches every event by its namespace, a map lookup, to the
// handlers of that namespace's virtual cluster only, rewritten to namespace
// "default". A virtual cluster costs one goroutine (its Start, run by the
// fleet engine) and no watch of its own.
//
// # Lifecycle
//
// The provider only decides which virtual clusters exist: the Namespace
// informer's events publish a namespace's virtual cluster to the fleet
// engine (a member whose Build makes a new view of the shared cluster,
// through pkg/clusters.Members) and withdraw it when the Namespace is
// deleted or terminating. The engine builds, starts, engages, probes (the
// shared API server) and tears the virtual clusters down, as it does every
// member: after an outage, or a hand-off to another replica and back, it
// builds the namespace's view again.
//
// Field indexes registered through the manager, the provider or any virtual
// cluster are added to the shared cache once; the cache's namespace-scoped
// index lookups answer MatchingFields in each virtual cluster.
//
// # Cluster-scoped objects are shared
//
// Cluster-scoped objects (Nodes, ClusterRoles, CustomResourceDefinitions,
// Namespaces themselves, ...) are not virtualised: every virtual cluster reads
// and writes the same objects of the shared API server, and an informer for a
// cluster-scoped type delivers the shared informer's objects unchanged (its
// handlers, too, are dispatched by the informer's one handler). Likewise GetConfig and
// GetHTTPClient return the shared API server's; requests made with them are
// not mapped into the namespace.
//
// Other limits: the objects' namespace is rewritten, but namespaces named in
// other fields (for example a RoleBinding subject's namespace) are not;
// per-handler resync periods and raw informer indexers (AddIndexers) are not
// supported on a virtual cluster and return errors saying so.
package namespace
