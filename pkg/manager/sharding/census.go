package sharding

import (
	"context"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
)

// Census is who runs the clusters this replica knows, as it sees the group:
// by the holder of each cluster's fence.
type Census struct {
	// Owned are the clusters whose fence this replica holds.
	Owned []string
	// Peer are the clusters whose fence a live peer holds (a peer whose
	// replica Lease this replica saw renewed within LeaseDuration).
	Peer []string
	// None are the clusters nobody this replica knows runs: no fence, a
	// released one, or one naming a replica that is no longer live. Outside a
	// hand-off it is empty; a cluster that stays here longer than
	// LeaseDuration is one that no replica takes (a provider that publishes it
	// on some replicas only, an owner that cannot engage it, ...).
	None []string
}

// Owners are the values of the owner label of multicluster_sharding_clusters.
const (
	OwnerThis = "this"
	OwnerPeer = "peer"
	OwnerNone = "none"
)

var ownership = metrics.NewGaugeVec("multicluster_sharding_clusters",
	"Clusters this replica knows, by who runs them as it sees the group: this replica (this), a live peer (peer), or nobody it knows (none: 0 outside a hand-off).",
	"group", "owner")

// Census sorts names by the holders of their fences. Before Start has seen
// the group, every name counts as owned by nobody. HostKey may be among
// names like any cluster.
func (c *Coordinator) Census(names []string) Census {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out Census
	live := map[string]bool{}
	for _, p := range c.peers {
		live[p.identity] = true
	}
	for _, name := range names {
		holder := ""
		if c.synced {
			if obj, ok, _ := c.store.GetByKey(c.opts.Namespace + "/" + leaseName(c.opts.Name, roleFence, name)); ok {
				lease := obj.(*coordinationv1.Lease)
				if lease.Annotations[AnnotationCluster] == name {
					holder = ptr.Deref(lease.Spec.HolderIdentity, "")
				}
			}
		}
		_, held := c.held[name]
		switch {
		case holder == c.opts.Identity && held && c.active:
			out.Owned = append(out.Owned, name)
		case holder != "" && holder != c.opts.Identity && live[holder]:
			out.Peer = append(out.Peer, name)
		default:
			out.None = append(out.None, name)
		}
	}
	return out
}

// ReportOwnership takes a census of names() every RetryPeriod until ctx
// ends: it exports the counts of clusters in multicluster_sharding_clusters
// (the host's key, if names returns it, is left out of the counts) and logs,
// once per occurrence and with its name, every cluster owned by nobody for
// longer than LeaseDuration: by then a dead owner's fences have expired and a
// live replica should have taken them, so nothing but a fault keeps a cluster
// unowned that long.
func (c *Coordinator) ReportOwnership(ctx context.Context, names func() []string) {
	t := time.NewTicker(c.opts.RetryPeriod)
	defer t.Stop()
	since := map[string]time.Time{} // unowned since
	logged := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		ready := c.synced && c.active && !c.stopping
		c.mu.Unlock()
		if !ready {
			continue // a replica that cannot renew owns nothing and sees nobody reliably
		}
		all := names()
		census := c.Census(all)
		count := func(ks []string) float64 {
			return float64(len(ks) - btoi(slices.Contains(ks, HostKey)))
		}
		ownership.WithLabelValues(c.opts.Name, OwnerThis).Set(count(census.Owned))
		ownership.WithLabelValues(c.opts.Name, OwnerPeer).Set(count(census.Peer))
		ownership.WithLabelValues(c.opts.Name, OwnerNone).Set(count(census.None))
		now := time.Now()
		unowned := map[string]bool{}
		for _, name := range census.None {
			unowned[name] = true
			first, ok := since[name]
			if !ok {
				since[name] = now
				continue
			}
			if !logged[name] && now.Sub(first) > c.opts.LeaseDuration {
				logged[name] = true
				c.log.Error(nil, "Nobody runs "+describe(name)+": its fence is free or names a replica that is gone, for longer than the lease duration",
					"cluster", name, "for", now.Sub(first).Round(time.Millisecond).String(), "assignedTo", c.Owner(name), "peers", c.Peers())
			}
		}
		for name := range since {
			if !unowned[name] {
				if logged[name] {
					c.log.Info(describe(name)+" has an owner again", "cluster", name, "unownedFor", now.Sub(since[name]).Round(time.Millisecond).String())
				}
				delete(since, name)
				delete(logged, name)
			}
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
