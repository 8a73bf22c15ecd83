package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// teardownAndRelease tears instances down and, once the clusters have
// stopped and the reconciles in flight against them have returned (bounded
// by the drain timeout), releases the fence: no two replicas ever run one
// cluster.
func (e *Engine) teardownAndRelease(name multicluster.ClusterName, stop []*instance, why string, release func()) {
	for _, in := range stop {
		e.teardown(name, in, why)
	}
	if release == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closing {
		// Start is waiting for its goroutines: release here, off the books.
		go func() {
			e.drain(name, stop)
			release()
		}()
		return
	}
	e.wg.Go(func() {
		e.drain(name, stop)
		release()
	})
}

// drain waits for the clusters of stop to stop and for their reconciles in
// flight to return, the latter for at most DrainTimeout; an overrun is logged
// and counted, and the fence is released anyway: the next owner would take it
// over once it expires.
func (e *Engine) drain(name multicluster.ClusterName, stop []*instance) {
	for _, in := range stop {
		if in.stopped != nil {
			<-in.stopped
		}
	}
	timer := time.NewTimer(e.opts.DrainTimeout)
	defer timer.Stop()
	for _, in := range stop {
		select {
		case <-in.inflight.wait():
		case <-timer.C:
			metrics.DrainOverruns.Inc()
			e.log.Error(fmt.Errorf("reconciles still running after %s", e.opts.DrainTimeout),
				"Releasing the cluster's fence although reconciles against it have not returned", "cluster", name)
			return
		}
	}
}

// admitLocked starts an attempt for rec's member if this replica may run it.
// Under the engine's exclusive lock, or lockRecord.
func (e *Engine) admitLocked(rec *record) {
	adm := e.opts.Admission
	if rec.member == nil || e.base.Err() != nil {
		return
	}
	// Before the engine runs, only adopted clusters without sharding are
	// engaged (their provider runs them, and subscribers remember them until
	// they start); members wait in StateWanted.
	if e.ctx == nil && (adm != nil || !rec.member.adopted) {
		return
	}
	if adm != nil && rec.fence == nil {
		if !adm.Owns(rec.name) || rec.acquiring {
			return
		}
		rec.acquiring = true
		e.wg.Go(func() { e.acquire(rec) })
		return
	}
	if rec.state == StateWanted {
		e.transitionLocked(rec, StateAdmitted, "this replica runs it")
	}
	e.attemptLocked(rec)
}

// acquire waits for the cluster's fence, then admits it. A failed Acquire (the
// fence is still being released by this replica's previous run of the
// cluster, or renewal lapsed) is retried with backoff for as long as this
// replica owns the cluster.
func (e *Engine) acquire(rec *record) {
	fence, release, err := e.opts.Admission.Acquire(e.ctx, rec.name)
	e.mu.Lock()
	defer e.mu.Unlock()
	wanted := e.ctx.Err() == nil && e.records.is(rec.name, rec) && rec.member != nil && e.opts.Admission.Owns(rec.name)
	if err != nil {
		rec.acquiring = false
		if !wanted {
			return
		}
		rec.acquireBackoff = min(max(2*rec.acquireBackoff, e.opts.MinBackoff), e.opts.MaxBackoff)
		e.log.Error(err, "Failed to acquire the cluster's fence, retrying", "cluster", rec.name, "retryIn", rec.acquireBackoff.String())
		rec.acquiring = true
		time.AfterFunc(rec.acquireBackoff, func() {
			e.mu.Lock()
			defer e.mu.Unlock()
			rec.acquiring = false
			if e.ctx.Err() == nil && e.records.is(rec.name, rec) && rec.fence == nil {
				e.admitLocked(rec)
			}
		})
		return
	}
	rec.acquiring, rec.acquireBackoff = false, 0
	if !wanted || rec.fence != nil {
		e.wg.Go(release)
		return
	}
	rec.fence, rec.releaseFence = fence, release
	context.AfterFunc(fence, func() { e.fenceLost(rec, fence) })
	e.admitLocked(rec)
}

// fenceLost stops a cluster whose fence ended (lost, or released).
func (e *Engine) fenceLost(rec *record, fence context.Context) {
	e.mu.Lock()
	if rec.fence != fence {
		e.mu.Unlock()
		return
	}
	e.unadmitLocked(rec, "not-owned")
	// Still owned (a brief renewal lapse): acquire again.
	e.admitLocked(rec)
	e.mu.Unlock()
}

// unadmitLocked takes rec back to StateWanted; its instances are torn down,
// then, once drained, its fence released.
func (e *Engine) unadmitLocked(rec *record, why string) {
	stop := rec.takeInstances()
	rec.gen++
	if rec.retry != nil {
		rec.retry.Stop()
	}
	release := rec.releaseFence
	rec.fence, rec.releaseFence = nil, nil
	e.transitionLocked(rec, StateWanted, why)
	// Engage calls waiting here return: the cluster is engaged where it runs.
	e.notifyLocked(rec, nil, nil)
	e.releaseSeriesLocked(rec)
	name := rec.name
	e.wg.Go(func() { e.teardownAndRelease(name, stop, why, release) })
}

// reassign admits the members this replica owns now and lets go of the
// others.
func (e *Engine) reassign() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for rec := range e.records.all() {
		owns := e.opts.Admission.Owns(rec.name)
		switch {
		case owns && rec.state == StateWanted:
			e.admitLocked(rec)
		case !owns && rec.fence != nil:
			e.unadmitLocked(rec, "not-owned")
		}
	}
}
