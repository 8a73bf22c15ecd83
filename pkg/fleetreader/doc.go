// Package fleetreader reads objects across every cluster of the fleet from the
// caches the controllers already hold: no extra watches, no extra API calls.
//
// A Reader is a multicluster.Aware runnable: the Multi-Cluster Manager's
// GetFleetReader creates one on first use (New does the same for any
// manager) and the manager engages it with every cluster it engages on this
// replica. A manager that never calls it carries no Reader.
// Its List and Get have the shape of controller-runtime's client.Reader; the
// generic List returns each object with the cluster it came from:
//
//	r, err := mgr.GetFleetReader()
//	// before or after the manager starts:
//	err = r.Informer(ctx, &appsv1.Deployment{})
//	entries, err := fleetreader.List[*appsv1.Deployment](ctx, r, client.MatchingLabels{"app": "web"})
//	for _, e := range entries {
//		fmt.Println(e.Cluster, e.Object.Name)
//	}
//
// # What is read
//
// Only clusters engaged on this replica are read: under sharding
// (mcmanager.WithSharding) a replica reads its own shard, not the fleet;
// NewAggregate computes a fleet-wide summary that is whole under sharding
// from per-cluster contributions (see Aggregate). The host cluster is not
// part of the fleet; read it through the manager.
//
// A namespace given for a cluster-scoped type is treated as
// controller-runtime's cache treats it: a List in a namespace returns
// nothing (the API server would ignore the namespace), and Get ignores it.
//
// Only types declared with Informer or IndexField are read. Declaring a type
// that a controller already watches costs nothing: the cluster's cache has
// one informer per type, shared by every controller and by the Reader. A type
// that is not declared is an error naming it, never a live list of every
// cluster.
//
// # Fleet-wide indexes
//
// IndexField maintains one inverted index for the whole fleet, fed by each
// cluster's informer: a List with MatchingFields on that field costs
// O(matches), not one lookup per cluster. Its entries of a cluster are
// removed when the cluster disengages.
//
// # Consistency
//
// The result is the union of per-cluster caches, each eventually consistent
// on its own. There is no snapshot across clusters: two objects read in one
// List may reflect different moments of their clusters, and a change in one
// cluster may be seen before an earlier change in another. A cluster whose
// informer for the type has not finished its initial list is left out (and
// logged) until it has. The objects of a cluster that disconnects or leaves
// vanish from results at once: the Reader reads a cluster only while its
// engagement lasts, and checks that at every read.
//
// Returned objects are copies: changing them never touches a cache.
package fleetreader
