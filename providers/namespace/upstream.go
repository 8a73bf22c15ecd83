package namespace

import "github.com/mcruntime/multicluster-runtime/pkg/multicluster"

// The types a namespace's virtual cluster is made of, under the upstream
// design's names, for programs that type-assert to them (to reach the
// namespace a cluster stands for, say). Their exported methods are those of
// the interfaces they implement.
type (
	// NamespacedCluster is the cluster.Cluster of one namespace: what Get
	// returns and what the manager engages.
	NamespacedCluster = virtualCluster
	// NamespacedClient is its client.Client: every request is made in the
	// namespace, which stands for "default" to the reconciler.
	NamespacedClient = nsClient
	// SubResourceNamespacedClient is its client of subresources (Status(),
	// SubResource(name)).
	SubResourceNamespacedClient = nsSubResourceClient
	// NamespacedCache is its cache.Cache: a view of the provider's one
	// shared cache.
	NamespacedCache = virtualCache
	// ScopedInformer is an informer of the shared cache seen from one
	// namespace: it delivers the namespace's objects only.
	ScopedInformer = scopedInformer
)

// Namespace returns the namespace the cluster stands for.
func (vc *virtualCluster) Namespace() string { return vc.namespace }

// Name returns the cluster's name, upstream's method: the namespace's name,
// under which the provider engages the cluster.
func (vc *virtualCluster) Name() multicluster.ClusterName { return vc.namespace }
