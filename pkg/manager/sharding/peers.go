package sharding

import (
	"context"
	"slices"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// recomputeLocked updates the live peer set and this replica's own standing at
// now, signals a change, ends fences if this replica is no longer active, and
// returns when the next expiry falls due (zero if none).
func (c *Coordinator) recomputeLocked(now time.Time) time.Time {
	var next time.Time
	due := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	active := !c.lastRenew.IsZero() && now.Before(c.lastRenew.Add(c.opts.RenewDeadline))
	if active {
		due(c.lastRenew.Add(c.opts.RenewDeadline))
	}
	if active != c.active {
		c.active = active
		if !active && !c.stopping {
			c.log.Error(nil, "replica Lease not renewed within RenewDeadline: giving up every cluster", "renewDeadline", c.opts.RenewDeadline, "fences", len(c.held))
			for _, f := range c.held {
				if f.ctx.Err() == nil {
					fenceEvents.WithLabelValues(c.opts.Name, eventLost).Inc()
				}
				f.cancel(ErrFenceLost)
			}
		}
		c.signalChangedLocked()
	}
	peers := []peer{{identity: c.opts.Identity, weight: c.opts.Weight}}
	for id, m := range c.replicas {
		if id == c.opts.Identity {
			continue
		}
		expiry := m.observedAt.Add(c.opts.LeaseDuration)
		if now.Before(expiry) {
			due(expiry)
			if !m.deleted {
				peers = append(peers, peer{identity: id, weight: m.weight})
			}
		} else if now.After(expiry.Add(staleAfter * c.opts.LeaseDuration)) {
			// Long gone: forget it, and delete the replica Lease a crashed replica
			// left behind (a replica that comes back recreates its own).
			delete(c.replicas, id)
			if !m.deleted {
				c.stale = append(c.stale, replica{identity: id, rv: m.rv})
			}
		}
	}
	slices.SortFunc(peers, func(a, b peer) int {
		if a.identity < b.identity {
			return -1
		}
		if a.identity > b.identity {
			return 1
		}
		return 0
	})
	if !slices.Equal(peers, c.peers) {
		if c.synced {
			c.log.Info("peers changed", "peers", len(peers))
		}
		c.peers = peers
		c.signalChangedLocked()
	}
	return next
}

func (c *Coordinator) signalChangedLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
	c.notifyLocked()
}

func (c *Coordinator) notifyLocked() {
	close(c.notify)
	c.notify = make(chan struct{})
}

// holderValidLocked reports whether a fence held by identity still excludes
// others at now, and until when.
func (c *Coordinator) holderValidLocked(identity string, now time.Time) (bool, time.Time) {
	if identity == "" {
		return false, time.Time{}
	}
	if identity == c.opts.Identity {
		return true, time.Time{}
	}
	m, ok := c.replicas[identity]
	if !ok {
		// A holder we have never seen (it left before we started, or its replica
		// Lease was deleted by hand): give it a full LeaseDuration from now.
		m = &replica{identity: identity, observedAt: now, deleted: true}
		c.replicas[identity] = m
	}
	expiry := m.observedAt.Add(c.opts.LeaseDuration)
	return now.Before(expiry), expiry
}

// newInformer watches the group's Leases (replicas and fences: one watch).
func (c *Coordinator) newInformer() cache.SharedIndexInformer {
	selector := labels.SelectorFromSet(labels.Set{LabelGroup: c.opts.Name}).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return c.leases.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return c.leases.Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &coordinationv1.Lease{}, 0, cache.Indexers{})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.observe(obj, false) },
		UpdateFunc: func(_, obj any) { c.observe(obj, false) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			c.observe(obj, true)
		},
	})
	c.mu.Lock()
	c.store = inf.GetStore()
	c.mu.Unlock()
	return inf
}

// observe records a Lease event.
func (c *Coordinator) observe(obj any, deleted bool) {
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch lease.Labels[LabelRole] {
	case roleReplica:
		id := ptr.Deref(lease.Spec.HolderIdentity, "")
		if id == "" || id == c.opts.Identity {
			return
		}
		renew := ""
		if lease.Spec.RenewTime != nil {
			renew = lease.Spec.RenewTime.UTC().String()
		}
		m, ok := c.replicas[id]
		if !ok {
			m = &replica{identity: id, observedAt: now}
			c.replicas[id] = m
		}
		if deleted {
			m.deleted = true // stays a fence holder until observedAt+LeaseDuration
		} else {
			if m.deleted || renew != m.renewTime {
				m.observedAt = now
			}
			m.deleted, m.renewTime, m.rv = false, renew, lease.ResourceVersion
			m.weight = 1
			if w, err := strconv.Atoi(lease.Annotations[AnnotationWeight]); err == nil && w > 0 {
				m.weight = w
			} else if s := lease.Annotations[AnnotationWeight]; s != "" {
				c.log.Error(err, "peer's weight is not a positive integer: using 1", "peer", id, "lease", lease.Name, "weight", s)
			}
		}
		c.recomputeLocked(now)
	case roleFence:
		cluster := lease.Annotations[AnnotationCluster]
		if cluster == HostKey {
			// The host's holder keeps it (see ownerLocked): its fence's
			// changes change the assignment.
			c.signalChangedLocked()
		}
		if f, ok := c.held[cluster]; ok && f.leaseName == lease.Name {
			holder := ptr.Deref(lease.Spec.HolderIdentity, "")
			switch {
			case deleted && f.ctx.Err() == nil:
				c.log.Error(ErrFenceLost, "fence Lease deleted under this replica", "cluster", cluster, "lease", lease.Name)
				fenceEvents.WithLabelValues(c.opts.Name, eventLost).Inc()
				f.cancel(ErrFenceLost)
			case lease.ResourceVersion == f.rv:
				f.seen = true
			case f.seen && holder != c.opts.Identity && f.ctx.Err() == nil:
				c.log.Error(ErrFenceLost, "fence taken from this replica", "cluster", cluster, "holder", holder)
				fenceEvents.WithLabelValues(c.opts.Name, eventLost).Inc()
				f.cancel(ErrFenceLost)
			}
		}
	}
	c.notifyLocked()
}
