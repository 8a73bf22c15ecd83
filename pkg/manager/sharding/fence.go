package sharding

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Acquire blocks until this replica holds the cluster's fence: a Lease on the
// host naming this replica, which no other replica takes while this replica
// renews its replica Lease. It proceeds once the previous holder released the
// fence, or its replica Lease was not renewed for LeaseDuration (as this replica
// observed it), or there was no holder.
//
// ctx bounds only the wait. The returned fenced context ends when the fence is
// lost (this replica failed to renew within RenewDeadline, or the fence was
// taken or deleted: cause ErrFenceLost), when the coordinator stops (cause
// ErrStopping) or on release. The caller must stop everything it does with the
// cluster when fenced ends, and then call release, which clears the holder at
// once so that the next owner need not wait for expiry. release is idempotent.
//
// Acquire does not check ownership: callers acquire the clusters for which Owns
// is true. It returns an error if the fence is already held by this replica
// (acquire once per cluster) or the coordinator stops.
func (c *Coordinator) Acquire(ctx context.Context, name string) (fenced context.Context, release func(), err error) {
	lname := leaseName(c.opts.Name, roleFence, name)
	key := c.opts.Namespace + "/" + lname
	c.mu.Lock()
	c.acquiring[name]++ // not an orphan while we write it
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.acquiring[name]--; c.acquiring[name] <= 0 {
			delete(c.acquiring, name)
		}
	}()
	for {
		now := time.Now()
		c.mu.Lock()
		if c.stopping {
			c.mu.Unlock()
			return nil, nil, fmt.Errorf("cluster %q: %w", name, ErrStopping)
		}
		if _, ok := c.held[name]; ok {
			c.mu.Unlock()
			return nil, nil, fmt.Errorf("cluster %q: fence already held by this replica", name)
		}
		wake := c.notify
		var cur *coordinationv1.Lease
		var until time.Time
		try := false
		if c.synced && c.active {
			if obj, ok, _ := c.store.GetByKey(key); ok {
				cur = obj.(*coordinationv1.Lease).DeepCopy()
			}
			if cur == nil {
				try = true
			} else {
				holder := ptr.Deref(cur.Spec.HolderIdentity, "")
				var valid bool
				valid, until = c.holderValidLocked(holder, now)
				try = !valid || holder == c.opts.Identity
			}
		}
		c.mu.Unlock()

		if cur != nil && cur.Annotations[AnnotationCluster] != name {
			return nil, nil, fmt.Errorf("cluster %q: fence Lease %s belongs to cluster %q", name, key, cur.Annotations[AnnotationCluster])
		}
		if try {
			out, err := c.writeFence(ctx, name, lname, cur)
			if err == nil {
				f, ferr := c.register(name, lname, out)
				if ferr == nil {
					return f.ctx, c.releaser(f), nil
				}
				c.release(name, out)
				if errors.Is(ferr, ErrStopping) {
					return nil, nil, fmt.Errorf("cluster %q: %w", name, ferr)
				}
			} else if !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && ctx.Err() == nil {
				c.log.Error(err, "writing a fence Lease failed; retrying", "cluster", name, "lease", lname)
			}
			// Lost a race or the cache was stale: the watch brings the winner's write.
			until = now.Add(c.opts.RetryPeriod)
		}

		wait := c.opts.RetryPeriod
		if !until.IsZero() {
			wait = max(time.Until(until), time.Millisecond)
		}
		if cur != nil && !try {
			c.log.V(1).Info("waiting for the fence", "cluster", name, "holder", ptr.Deref(cur.Spec.HolderIdentity, ""), "for", wait)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, nil, fmt.Errorf("cluster %q: waiting for the fence: %w", name, context.Cause(ctx))
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// writeFence creates the fence Lease, or takes over cur with optimistic
// concurrency: of two replicas writing the same version, one fails.
func (c *Coordinator) writeFence(ctx context.Context, cluster, lname string, cur *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.RenewDeadline/2)
	defer cancel()
	now := metav1.NewMicroTime(time.Now())
	lease := cur
	if lease == nil {
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Name:        lname,
			Namespace:   c.opts.Namespace,
			Labels:      map[string]string{LabelGroup: c.opts.Name, LabelRole: roleFence},
			Annotations: map[string]string{AnnotationCluster: cluster},
		}}
	}
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[annotationToken] = randomHex(8) // this acquisition: see clearFence
	previous := ptr.Deref(lease.Spec.HolderIdentity, "")
	if previous != c.opts.Identity {
		lease.Spec.LeaseTransitions = ptr.To(ptr.Deref(lease.Spec.LeaseTransitions, 0) + 1)
	}
	lease.Spec.HolderIdentity = ptr.To(c.opts.Identity)
	lease.Spec.AcquireTime = &now
	lease.Spec.RenewTime = &now
	lease.Spec.LeaseDurationSeconds = ptr.To(int32((c.opts.LeaseDuration + time.Second - 1) / time.Second))
	if cur == nil {
		out, err := c.leases.Create(ctx, lease, metav1.CreateOptions{})
		if err == nil {
			fenceEvents.WithLabelValues(c.opts.Name, eventAcquired).Inc()
		}
		return out, err
	}
	out, err := c.leases.Update(ctx, lease, metav1.UpdateOptions{})
	if err == nil && previous != "" && previous != c.opts.Identity {
		c.log.Info("fence taken over from an expired replica", "cluster", cluster, "previous", previous)
		fenceEvents.WithLabelValues(c.opts.Name, eventTakenOver).Inc()
	} else if err == nil {
		fenceEvents.WithLabelValues(c.opts.Name, eventAcquired).Inc()
	}
	return out, err
}

// register records a fence this replica just wrote.
func (c *Coordinator) register(cluster, lname string, lease *coordinationv1.Lease) (*fence, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopping {
		return nil, ErrStopping
	}
	if !c.active {
		return nil, ErrFenceLost // renewal lapsed while we wrote: do not use it
	}
	// Not ended by Start's ctx directly: shutdown ends it with ErrStopping.
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(c.runCtx))
	f := &fence{cluster: cluster, leaseName: lname, ctx: ctx, cancel: cancel, rv: lease.ResourceVersion, lease: lease}
	c.held[cluster] = f
	return f, nil
}

func (c *Coordinator) releaser(f *fence) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			if c.held[f.cluster] == f {
				delete(c.held, f.cluster)
			}
			f.cancel(ErrReleased)
			c.notifyLocked()
			c.mu.Unlock()
			c.release(f.cluster, f.lease)
		})
	}
}

// clearFence empties the holder of a fence Lease this replica wrote (lease is
// what the write returned). If the Lease changed since, it is read again and
// cleared only if it still holds the same acquisition (its token): a fence
// taken by another replica, or acquired again by this one, is left alone. It
// returns false if the fence could not be cleared; the caller retries later,
// since a fence left naming a live replica would block the next owner.
func (c *Coordinator) clearFence(cluster string, lease *coordinationv1.Lease) bool {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.RenewDeadline)
	defer cancel()
	token := lease.Annotations[annotationToken]
	lease = lease.DeepCopy()
	var err error
	for range 3 {
		lease.Spec.HolderIdentity = nil
		lease.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
		if _, err = c.leases.Update(ctx, lease, metav1.UpdateOptions{}); err == nil {
			fenceEvents.WithLabelValues(c.opts.Name, eventReleased).Inc()
			return true
		}
		if !apierrors.IsConflict(err) {
			break
		}
		if lease, err = c.leases.Get(ctx, lease.Name, metav1.GetOptions{}); err != nil {
			break
		}
		if ptr.Deref(lease.Spec.HolderIdentity, "") != c.opts.Identity || lease.Annotations[annotationToken] != token {
			return true // taken over after this replica lost it, or acquired again
		}
	}
	if apierrors.IsNotFound(err) {
		return true
	}
	fenceEvents.WithLabelValues(c.opts.Name, eventReleaseFailed).Inc()
	c.log.Error(err, "releasing a fence failed; retrying every RetryPeriod", "cluster", cluster, "lease", lease.Name)
	return false
}

// release clears a fence, or keeps it for the loop to retry.
func (c *Coordinator) release(cluster string, lease *coordinationv1.Lease) {
	if c.clearFence(cluster, lease) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unreleased == nil {
		c.unreleased = map[string]*coordinationv1.Lease{}
	}
	c.unreleased[cluster] = lease
}

// retryReleases retries the fences whose release failed, and clears orphans:
// fences that name this replica although it neither holds nor is acquiring
// them (a write that timed out but was applied, or fences left by a previous
// process with this identity). Either would block the next owner for as long as
// this replica lives.
func (c *Coordinator) retryReleases() {
	c.mu.Lock()
	pending := c.unreleased
	c.unreleased = nil
	var orphans []*coordinationv1.Lease
	if c.synced && c.active && !c.stopping {
		for _, obj := range c.store.List() {
			lease := obj.(*coordinationv1.Lease)
			cluster := lease.Annotations[AnnotationCluster]
			if lease.Labels[LabelRole] != roleFence || ptr.Deref(lease.Spec.HolderIdentity, "") != c.opts.Identity {
				continue
			}
			if _, held := c.held[cluster]; held || c.acquiring[cluster] > 0 || pending[cluster] != nil {
				continue
			}
			orphans = append(orphans, lease.DeepCopy())
		}
	}
	c.mu.Unlock()
	for cluster, lease := range pending {
		c.release(cluster, lease)
	}
	for _, lease := range orphans {
		cluster := lease.Annotations[AnnotationCluster]
		c.log.Info("clearing a fence that names this replica but is not held", "cluster", cluster, "lease", lease.Name)
		c.release(cluster, lease)
	}
}
