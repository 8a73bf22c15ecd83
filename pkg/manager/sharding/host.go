package sharding

// HostKey is the key under which the host's own work is assigned and fenced:
// the work of a sharded controller that belongs to no member (the runnables
// and host controllers that would need leader election without sharding, the
// host requests of controllers built to serve them on the host's owner alone,
// the combining side of a sharded aggregate). It is the host cluster's name,
// "", which no member can have (the Multi-Cluster Manager rejects it), so the
// host is an ordinary key to the coordinator: Owns(HostKey) is decided by the
// same weighted rendezvous hashing as any cluster, Acquire(ctx, HostKey) takes
// the host's fence ("<Name>-fence-<hash of "">"), renewed with the replica
// Lease like every fence, and the host moves on hand-off with the same
// guarantees as a member: never two replicas at once, and to a live replica
// within LeaseDuration plus one sync when its owner dies.
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
