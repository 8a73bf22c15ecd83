package controller

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
)

// This file holds host-owner-only controllers: under sharding, a controller
// whose host reconciles write only to the host has its host requests
// (ClusterName "") reconciled by the replica that runs the host's work alone
// (mcmanager.HostOwner), as its member requests are by each member's owner.
// For it the host is engaged like a member: for each tenure of this replica
// over the host, its watches of the host start (their initial lists enqueue
// every host object, so the new owner catches up in one sync) and they stop
// when the tenure ends; host requests queued or retried on a replica without
// the host are dropped with the reason "host-not-owned", and the host's fence
// is released only after this controller's host reconciles in flight have
// returned.

// ErrAlreadyStarted is returned by ServeHostOnHostOwner for a controller
// that has started: its host watches run already.
var ErrAlreadyStarted = errors.New("controller already started")

// ServeHostOnHostOwner makes c reconcile its host requests only on the
// replica that runs the host's work under sharding; without sharding it
// changes nothing. Call it before the controller starts (mcbuilder's
// WithHostReconcilesOnHostOwner does, before it adds the controller to the
// manager). A controller whose host reconciles write into members (hub to
// fleet fan-out) must not use it: each replica writes the members it owns,
// so each needs the host's events.
func ServeHostOnHostOwner[request comparable](c TypedController[request]) error {
	h, ok := c.(interface{ serveHostOnHostOwner() error })
	if !ok {
		return fmt.Errorf("%T is not a multi-cluster controller of this package", c)
	}
	return h.serveHostOnHostOwner()
}

func (c *mcController[request]) serveHostOnHostOwner() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.queue != nil {
		return fmt.Errorf("controller %q: serving the host on its owner alone: %w", c.name, ErrAlreadyStarted)
	}
	if c.hostOwner == nil {
		return nil // not a Multi-Cluster Manager's: nothing to gate on
	}
	c.hostOwnerOnly = true
	return nil
}

// startHost engages the host when the controller starts: for its lifetime,
// or, for a host-owner-only controller under sharding, for each tenure of
// this replica over the host. Called under c.mu.
func (c *mcController[request]) startHostLocked(ctx context.Context) {
	if c.hostOwnerOnly && c.hostOwner.OnHostTenure(c.beginHostTenure) {
		return
	}
	c.hostOwnerOnly = false // no sharding: the host is this replica's
	hostCtx, cancelHost := context.WithCancel(ctx)
	c.clusters.Store("", &engagement{cl: c.host, ctx: hostCtx, cancel: cancelHost})
}

// beginHostTenure engages the host for one tenure: the controller's sources
// start in it as in a joining member.
func (c *mcController[request]) beginHostTenure(tenure context.Context) {
	c.mu.RLock()
	ctx := c.ctx
	c.mu.RUnlock()
	if ctx == nil || ctx.Err() != nil {
		return
	}
	// The tenure ends with the controller too.
	tctx, cancel := context.WithCancel(tenure)
	stop := context.AfterFunc(ctx, cancel)
	context.AfterFunc(tctx, func() { stop(); cancel() })
	e, srcs, err := c.engage(tctx, "", c.host)
	if err != nil || e == nil {
		cancel()
		return
	}
	c.log.Info("Serving host requests: this replica runs the host's work")
	context.AfterFunc(tctx, func() { c.log.Info("No longer serving host requests: this replica gave the host's work up") })
	c.startWithRetry(e, "", srcs)
}

// hostEngagement is the context of the host's engagement, nil when this
// host-owner-only controller does not serve the host now.
func (c *mcController[request]) hostEngagement() context.Context {
	if !c.hostOwnerOnly {
		return context.Background()
	}
	if e := c.lookup(""); e != nil {
		return e.ctx
	}
	return nil
}

// holdHost holds the host's fence for a host reconcile.
func (c *mcController[request]) holdHost() (func(), bool) {
	if !c.hostOwnerOnly {
		return func() {}, true
	}
	_, done, ok := c.hostOwner.HoldHost()
	return done, ok
}

// hostNotOwned drops a host request on a replica that does not run the
// host's work: the host's owner reconciles it (its initial list covers every
// host object).
func (c *mcController[request]) hostNotOwned(req request) reconcile.Result {
	c.stopWaiting(req)
	metrics.DroppedRequests.WithLabelValues(c.name, "host-not-owned").Inc()
	c.log.Info("Dropping request", "cluster", "", "request", fmt.Sprint(req), "reason", "host-not-owned")
	return reconcile.Result{}
}
