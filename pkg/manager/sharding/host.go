package sharding

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
)

// HostKey is the key under which the host's own work is assigned and fenced:
// the work of a sharded controller that belongs to no member (the runnables
// and host controllers that would need leader election without sharding, the
// host requests of controllers built to serve them on the host's owner alone,
// the combining side of a sharded aggregate). It is the host cluster's name,
// "", which no member can have (the Multi-Cluster Manager rejects it), so the
// host is a key like a cluster's to the coordinator: Acquire(ctx, HostKey)
// takes the host's fence ("<Name>-fence-<hash of "">"), renewed with the
// replica Lease like every fence, and the host moves on hand-off with the same
// guarantees as a member: never two replicas at once, and to a live replica
// within LeaseDuration plus one sync when its owner dies.
//
// One difference: the host is not rebalanced. While its fence names a live
// replica, that replica owns it, for every replica (Owns, Owner); only a host
// without a live holder (released, or its holder gone) is assigned by the
// weighted rendezvous hashing of every cluster. Members are rebalanced to
// spread load over the replicas; the host is one key, with no load to
// spread, and moving it restarts the host's work: a controller-runtime
// controller, which starts once per process, could not be started again on a
// replica that held the host before (replicas starting one after another
// would move it at every start).
const HostKey = ""

// OwnsHost reports whether the host's work is assigned to this replica now
// (Owns(HostKey)).
func (c *Coordinator) OwnsHost() bool { return c.Owns(HostKey) }

// describe names a key in logs: the host, or the cluster.
func describe(key string) string {
	if key == HostKey {
		return "the host"
	}
	return "cluster " + key
}

// ownerLocked is the replica name is assigned to: the rendezvous owner among
// the live peers, except that the host stays with its holder while that
// lives. Under c.mu.
func (c *Coordinator) ownerLocked(name string) string {
	if name == HostKey {
		if holder := c.hostHolderLocked(); holder != "" {
			return holder
		}
	}
	return owner(c.peers, name)
}

// hostHolderLocked returns the live replica holding the host's fence, "" if
// none: this replica if it holds it, a peer that the fence Lease names and
// that this replica sees live. Under c.mu.
func (c *Coordinator) hostHolderLocked() string {
	if _, ok := c.held[HostKey]; ok {
		return c.opts.Identity
	}
	if c.store == nil {
		return ""
	}
	obj, ok, _ := c.store.GetByKey(c.opts.Namespace + "/" + leaseName(c.opts.Name, roleFence, HostKey))
	if !ok {
		return ""
	}
	lease := obj.(*coordinationv1.Lease)
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	if holder == "" || holder == c.opts.Identity || lease.Annotations[AnnotationCluster] != HostKey {
		return "" // ours but not held: released, or an orphan being cleared
	}
	for _, p := range c.peers {
		if p.identity == holder {
			return holder
		}
	}
	return ""
}
