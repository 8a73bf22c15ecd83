package controller

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/internal/redact"
	"github.com/mcruntime/multicluster-runtime/pkg/controller/fairqueue"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// This file holds what happens to a request whose cluster this controller
// is not engaged with, or no longer: held while the cluster joins, dropped
// for a stated reason, or requeued when the cluster was replaced under it.

// notEngaged decides about a request for a cluster this controller is not
// engaged with. A cluster that is joining (being started, or engaged with the
// fleet while this controller's watches are set up) gets its requests back
// once it changes state or engages with this controller, for at most
// CacheSyncTimeout: hub-to-fleet fan-out may name a member before it has
// joined. Any other request is dropped for a stated reason, logged and
// counted.
func (c *mcController[request]) notEngaged(req request) reconcile.Result {
	reason := "cluster-not-engaged"
	var changed <-chan struct{}
	if c.fleet != nil {
		// One snapshot: the channel is closed at any change after the state
		// read with it.
		snap, known := c.fleet.Snapshot(req.Cluster())
		changed = snap.Changed
		switch {
		case !known:
		case snap.State == fleet.StateDisconnected:
			reason = "cluster-disconnected"
		case snap.State == fleet.StateWanted && !snap.Joining:
			reason = "cluster-not-owned"
		default:
			reason = ""
		}
	}
	if reason == "" {
		c.joinChecks.Add(1)
		if c.park(req, changed) {
			return reconcile.Result{}
		}
		reason = "cluster-join-timeout"
	}
	c.stopWaiting(req)
	metrics.DroppedRequests.WithLabelValues(c.name, reason).Inc()
	c.log.Info("Dropping request", "cluster", req.Cluster(), "request", fmt.Sprint(req), "reason", reason)
	return reconcile.Result{}
}

// parking holds the requests waiting for one joining cluster until it
// changes state in the fleet, engages with this controller, or the first of
// them has waited CacheSyncTimeout. Then every one is queued again and looked
// at anew: no request polls.
type parking[request comparable] struct {
	reqs     map[request]struct{}
	deadline time.Time
	timer    *time.Timer
	wake     chan struct{} // closed when the cluster engages with this controller
	woken    bool
}

// park keeps req until its cluster changes state (changed is closed) or
// engages with this controller. It reports false once req has waited
// CacheSyncTimeout.
func (c *mcController[request]) park(req request, changed <-chan struct{}) bool {
	name := req.Cluster()
	c.waitMu.Lock()
	defer c.waitMu.Unlock()
	since, ok := c.waiting[req]
	if !ok {
		since = time.Now()
		c.waiting[req] = since
		c.nWaiting.Store(int32(len(c.waiting)))
	}
	deadline := since.Add(c.timeout)
	left := time.Until(deadline)
	if left <= 0 {
		return false
	}
	p := c.parked[name]
	if p == nil {
		p = &parking[request]{reqs: map[request]struct{}{}, deadline: deadline, timer: time.NewTimer(left), wake: make(chan struct{})}
		c.parked[name] = p
		go c.waitForJoin(name, p, changed)
	} else if deadline.Before(p.deadline) {
		p.deadline = deadline
		p.timer.Reset(left)
	}
	p.reqs[req] = struct{}{}
	if c.lookup(name) != nil {
		// Engaged between the reconcile's look and now: its wake came early.
		c.wakeLocked(p)
	}
	return true
}

// waitForJoin queues the requests of p again once the cluster changed state,
// engaged with this controller, or the first of them has waited long enough.
func (c *mcController[request]) waitForJoin(name multicluster.ClusterName, p *parking[request], changed <-chan struct{}) {
	c.mu.RLock()
	q, stop := c.queue, c.ctx
	c.mu.RUnlock()
	select {
	case <-changed:
	case <-p.wake:
	case <-p.timer.C:
	case <-stop.Done():
	}
	p.timer.Stop()
	c.waitMu.Lock()
	if c.parked[name] == p {
		delete(c.parked, name)
	}
	reqs := p.reqs
	p.reqs = nil
	c.waitMu.Unlock()
	for req := range reqs {
		q.Add(req)
	}
}

// wake queues again the requests waiting for name: it engaged with this
// controller.
func (c *mcController[request]) wake(name multicluster.ClusterName) {
	if c.nWaiting.Load() == 0 {
		return
	}
	c.waitMu.Lock()
	if p := c.parked[name]; p != nil {
		c.wakeLocked(p)
	}
	c.waitMu.Unlock()
}

func (c *mcController[request]) wakeLocked(p *parking[request]) {
	if !p.woken {
		p.woken = true
		close(p.wake)
	}
}

// pausableQueue is a queue that holds the requests of a cluster itself: the
// fair queue, whose lane of a paused cluster is not served.
type pausableQueue interface {
	Pause(cluster string)
	Resume(cluster string)
}

var _ pausableQueue = &fairqueue.Queue[string]{}

// holdPaused keeps req while its cluster is paused: requests are held,
// deduplicated, not dropped and not reconciled; when the cluster is resumed
// (or removed) each is reconciled once. With the fair queue they are held in
// one place, the cluster's lane of the queue, which is not served while the
// cluster is paused and deduplicates as any queue: a request added before,
// during or at the moment of the resume is reconciled once. With a queue
// that cannot hold a cluster (PlainQueue, a NewQueue of one's own), they are
// kept beside it and queued again on the resume: a request queued again at
// that moment may then be reconciled twice.
func (c *mcController[request]) holdPaused(req request, changed <-chan struct{}) {
	name := req.Cluster()
	c.mu.RLock()
	q := c.queue
	c.mu.RUnlock()
	lanes, _ := q.(pausableQueue)
	c.waitMu.Lock()
	held, ok := c.paused[name]
	if !ok {
		if lanes != nil {
			lanes.Pause(name)
		} else {
			held = map[request]struct{}{}
		}
		c.paused[name] = held
		go c.waitForResume(name, changed, lanes)
	}
	if held != nil {
		held[req] = struct{}{}
	}
	c.waitMu.Unlock()
	if held == nil {
		q.Add(req) // in processing now: queued in the paused lane once Done
	}
}

// waitForResume waits until the cluster of name is no longer paused (resumed,
// or removed: each change closes changed), then serves its requests again.
func (c *mcController[request]) waitForResume(name multicluster.ClusterName, changed <-chan struct{}, lanes pausableQueue) {
	c.mu.RLock()
	q, stop := c.queue, c.ctx
	c.mu.RUnlock()
	for {
		select {
		case <-changed:
		case <-stop.Done():
			return // the queue shuts down with the controller
		}
		snap, _ := c.fleet.Snapshot(name)
		if !snap.Paused {
			break
		}
		changed = snap.Changed // another change while paused: still held
	}
	c.waitMu.Lock()
	reqs := c.paused[name]
	delete(c.paused, name)
	if lanes != nil {
		lanes.Resume(name)
	}
	c.waitMu.Unlock()
	for req := range reqs {
		q.Add(req)
	}
}

// stopping reports whether the controller is shutting down, which ends
// every engagement; a reconcile then ends as controller-runtime ends it.
func (c *mcController[request]) stopping() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.ctx != nil && c.ctx.Err() != nil
}

// hold marks a reconcile against the cluster in flight with the fleet engine,
// so that the cluster's fence waits for it; ok is false when the reconcile
// must not run (see fleet.Engine.Hold). The host needs the host's hold when
// its reconciles are served by the host's owner alone (see holdHost).
func (c *mcController[request]) hold(engagement context.Context, name multicluster.ClusterName) (done func(), ok bool) {
	if name == "" {
		return c.holdHost()
	}
	if c.fleet == nil {
		return func() {}, true
	}
	_, done, ok = c.fleet.Hold(engagement, name)
	return done, ok
}

// disengagedDuring handles a request whose cluster's engagement ended while
// it was reconciled: its context was cancelled. If the same name is engaged
// again, or on its way (a replaced instance: rotated credentials, a
// reconnect), the request is requeued: requests no watch produces again (hub
// fan-out, channel events, RequeueAfter chains) are not lost. Otherwise it is
// dropped: whatever it failed to do is done again from the initial list of
// the cluster when it is engaged again.
func (c *mcController[request]) disengagedDuring(req request, err error) reconcile.Result {
	if now := c.engagement(req.Cluster()); (now != nil && now.Err() == nil) || (c.fleet != nil && c.joining(req.Cluster())) {
		c.log.V(1).Info("Requeueing request: its cluster was replaced while it was reconciled", "cluster", req.Cluster(), "request", fmt.Sprint(req))
		return reconcile.Result{RequeueAfter: time.Millisecond}
	}
	metrics.DroppedRequests.WithLabelValues(c.name, "cluster-disengaged").Inc()
	log := c.log.WithValues("cluster", req.Cluster(), "request", fmt.Sprint(req), "reason", "cluster-disengaged")
	if err != nil {
		log = log.WithValues("reconcileError", redact.Known.Cluster(req.Cluster(), err.Error()))
	}
	log.Info("Dropping request: its cluster was disengaged while it was reconciled")
	return reconcile.Result{}
}

func (c *mcController[request]) stopWaiting(req request) {
	if c.nWaiting.Load() == 0 {
		return // the common case, on every reconcile: nothing waits
	}
	c.waitMu.Lock()
	delete(c.waiting, req)
	c.nWaiting.Store(int32(len(c.waiting)))
	c.waitMu.Unlock()
}

// joining reports whether name is on its way to being engaged here.
func (c *mcController[request]) joining(name multicluster.ClusterName) bool {
	snap, _ := c.fleet.Snapshot(name)
	return snap.Joining
}
