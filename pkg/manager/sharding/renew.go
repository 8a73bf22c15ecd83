package sharding

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// join creates the replica Lease, retrying every RetryPeriod for up to
// RenewDeadline: a short outage at start-up is not fatal, a lasting one (such as
// missing RBAC) is reported.
func (c *Coordinator) join(ctx context.Context) error {
	giveUp := time.Now().Add(c.opts.RenewDeadline)
	for {
		rctx, cancel := context.WithTimeout(ctx, c.opts.RenewDeadline/2)
		err := c.renew(rctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		if errors.Is(err, errIdentityInUse) {
			giveUp = time.Now().Add(c.opts.RenewDeadline) // waiting for the other process, not failing
		} else if time.Now().Add(c.opts.RetryPeriod).After(giveUp) {
			return err
		}
		c.log.Error(err, "registering this replica failed; retrying", "lease", c.replicaLease)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.opts.RetryPeriod):
		}
	}
}

// loop renews the replica Lease every RetryPeriod and re-evaluates expiries when
// they fall due.
func (c *Coordinator) loop(ctx context.Context) {
	renewAt := time.Now().Add(c.opts.RetryPeriod)
	timer := time.NewTimer(c.opts.RetryPeriod)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		now := time.Now()
		if !now.Before(renewAt) {
			rctx, cancel := context.WithTimeout(ctx, c.opts.RenewDeadline/2)
			if err := c.renew(rctx); err != nil && ctx.Err() == nil {
				renewalFailures.WithLabelValues(c.opts.Name).Inc()
				c.log.Error(err, "renewing the replica Lease failed", "lease", c.replicaLease)
			}
			cancel()
			renewAt = time.Now().Add(c.opts.RetryPeriod)
		}
		c.mu.Lock()
		next := c.recomputeLocked(time.Now())
		stale := c.stale
		c.stale = nil
		c.mu.Unlock()
		for _, m := range stale {
			c.deleteStale(ctx, m)
		}
		if next.IsZero() || next.After(renewAt) {
			next = renewAt
		}
		timer.Reset(max(time.Until(next), time.Millisecond))
	}
}

// deleteStale deletes the replica Lease of a replica that has been silent for
// long, unless it renewed meanwhile.
func (c *Coordinator) deleteStale(ctx context.Context, m replica) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.RenewDeadline/2)
	defer cancel()
	name := leaseName(c.opts.Name, roleReplica, m.identity)
	err := c.leases.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &m.rv}})
	switch {
	case err == nil:
		c.log.Info("deleted the replica Lease of a replica silent for long", "peer", m.identity, "lease", name)
	case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
		c.log.Error(err, "deleting a stale replica Lease failed", "peer", m.identity, "lease", name)
	}
}

// errIdentityInUse: the replica Lease of this identity is renewed by another
// process (a duplicate Identity, or this replica's previous incarnation).
var errIdentityInUse = errors.New("sharding: replica Lease renewed by another process with the same identity")

// checkForeign allows taking over a replica Lease of this identity written by
// another process only once that process has been silent for LeaseDuration (as
// observed here): a restarted replica with a stable identity waits for its
// previous incarnation to have given its clusters up, and two processes given
// the same identity never both run.
func (c *Coordinator) checkForeign(cur *coordinationv1.Lease) error {
	if cur.Annotations[annotationIncarnation] == c.incarnation {
		return nil
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur.ResourceVersion != c.foreignRV {
		c.foreignRV, c.foreignSince = cur.ResourceVersion, now
	}
	if wait := c.foreignSince.Add(c.opts.LeaseDuration).Sub(now); wait > 0 {
		return fmt.Errorf("%w: Lease %s/%s, taking it over if it stays silent for %s", errIdentityInUse, c.opts.Namespace, c.replicaLease, wait.Round(time.Millisecond))
	}
	return nil
}

// renew writes the replica Lease (creating it if needed) and records when the
// request was sent.
func (c *Coordinator) renew(ctx context.Context) error {
	sent := time.Now()
	c.mu.Lock()
	rv := c.replicaRV
	c.mu.Unlock()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:            c.replicaLease,
			Namespace:       c.opts.Namespace,
			ResourceVersion: rv,
			Labels:          map[string]string{LabelGroup: c.opts.Name, LabelRole: roleReplica},
			Annotations:     map[string]string{AnnotationWeight: strconv.Itoa(c.opts.Weight), annotationIncarnation: c.incarnation},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(c.opts.Identity),
			LeaseDurationSeconds: ptr.To(int32((c.opts.LeaseDuration + time.Second - 1) / time.Second)),
			RenewTime:            ptr.To(metav1.NewMicroTime(sent)),
		},
	}
	var out *coordinationv1.Lease
	var err error
	if rv == "" {
		out, err = c.renewals.Create(ctx, lease, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			var cur *coordinationv1.Lease
			if cur, err = c.renewals.Get(ctx, c.replicaLease, metav1.GetOptions{}); err == nil {
				if err = c.checkForeign(cur); err == nil {
					lease.ResourceVersion = cur.ResourceVersion
					out, err = c.renewals.Update(ctx, lease, metav1.UpdateOptions{})
				}
			}
		}
	} else {
		out, err = c.renewals.Update(ctx, lease, metav1.UpdateOptions{})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			c.replicaRV = "" // deleted or changed by someone else: recreate or re-read next time
		}
		return err
	}
	c.replicaRV = out.ResourceVersion
	c.lastRenew = sent
	if c.deadline != nil {
		c.deadline.Reset(time.Until(sent.Add(c.opts.RenewDeadline)))
	}
	c.recomputeLocked(time.Now())
	return nil
}
