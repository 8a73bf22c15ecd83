package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Subscribe engages a with every engaged cluster now and every cluster
// engaged later. It returns once a has been offered the current ones,
// concurrently; their errors are logged and counted, not returned: the
// clusters stay engaged with everyone else. A cluster whose engagement is in
// flight is offered to a by that engagement, never twice, and Subscribe does
// not wait for it.
func (e *Engine) Subscribe(a multicluster.Aware) {
	e.mu.Lock()
	idx := len(e.subs)
	e.subs = append(e.subs, a)
	recs := make([]*record, 0, e.records.len())
	var engaging []*record
	for rec := range e.records.all() {
		if rec.engaging != nil {
			engaging = append(engaging, rec)
		} else {
			recs = append(recs, rec)
		}
	}
	e.mu.Unlock()

	// An engagement in flight waits for every controller's watches to sync,
	// up to their CacheSyncTimeout: it offers the cluster to a itself, and a
	// is not held up by it (mgr.Add after start returns at once). The
	// catch-up runs anyway, for an engagement that ends without a.
	for _, rec := range engaging {
		go e.catchUp(rec, idx, a)
	}
	var wg sync.WaitGroup
	for _, rec := range recs {
		wg.Go(func() { e.catchUp(rec, idx, a) })
	}
	wg.Wait()
}

// catchUp engages subscriber idx with rec's current instance unless it holds
// it already. Serialized with the name's engagements (nameLocks): the one
// path that catches late subscribers up besides the engagement itself.
func (e *Engine) catchUp(rec *record, idx int, a multicluster.Aware) {
	defer e.engLocks.lock(rec.name)()
	e.mu.RLock()
	rec.mu.RLock()
	in := rec.cur
	ok := e.records.is(rec.name, rec) && rec.state == StateEngaged && in != nil && in.eng != nil && in.eng.Err() == nil
	rec.mu.RUnlock()
	e.mu.RUnlock()
	if !ok || (idx < len(in.offered) && in.offered[idx]) {
		return
	}
	in.offer(idx)
	if err := a.Engage(in.eng, rec.name, in.cl); err != nil && in.eng.Err() == nil {
		metrics.Engagements.WithLabelValues("failure").Inc()
		e.log.Error(err, "Failed to engage a cluster with a runnable added late", "cluster", rec.name)
	}
}

// Engage adopts a cluster that its provider started and synced: the way in
// of providers written as the seeds describe. Inside the engine the cluster
// is a member like any other, with a pre-built cluster: admitted, fenced,
// probed, handed off and torn down by the same code. ctx is the provider's:
// when it ends, the member is removed.
//
// Engage returns once the cluster is engaged with every subscriber. If a
// subscriber refuses, every subscriber lets go of the cluster, the member is
// removed and the error is returned (all or nothing). Before the engine runs,
// or while sharding assigns the cluster to another replica, Engage returns at
// once: the member waits, and is engaged when this replica may run it.
//
// Engaging the same instance again, under the same or a new ctx, keeps the
// engagement and ties it to the new ctx; a different instance replaces the
// engaged one once it is engaged.
func (e *Engine) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	if err := ctx.Err(); err != nil {
		return multicluster.WithCluster(name, fmt.Errorf("engagement context already done: %w", err))
	}
	e.mu.Lock()
	rec := e.recordLocked(name)
	if rec.member != nil && !rec.member.adopted {
		e.mu.Unlock()
		return multicluster.WithCluster(name, errors.New("already a member published by a provider; a name has one source"))
	}
	m := rec.member
	if m == nil || m.Cluster != cl {
		e.adopted++
		m = &Member{Name: name, Hash: fmt.Sprintf("adopted-%d", e.adopted), Cluster: cl, adopted: true}
		e.notifyLocked(rec, rec.member, multicluster.WithCluster(name, errors.New("replaced by another instance")))
		rec.member = m
		if rec.state == "" {
			e.transitionLocked(rec, StateWanted, "engaged by its provider")
		}
		e.ownLocked(rec, m, ctx)
		e.admitLocked(rec)
	} else {
		e.ownLocked(rec, m, ctx)
	}
	if (rec.cur != nil && rec.cur.member == m) || !e.runsLocked(rec) {
		e.mu.Unlock()
		return nil
	}
	w := &waiter{m: m, done: make(chan error, 1)}
	rec.waiters = append(rec.waiters, w)
	e.mu.Unlock()

	select {
	case err := <-w.done:
		if err == nil {
			return nil
		}
		// All or nothing: the provider hears of the refusal; the cluster leaves.
		e.mu.Lock()
		var stop []*instance
		var release func()
		if rec.member == m && e.records.is(name, rec) {
			stop, release = e.removeLocked(rec, "engagement refused")
		}
		e.mu.Unlock()
		e.teardownAndRelease(name, stop, "engagement refused", release)
		return err
	case <-ctx.Done():
		return multicluster.WithCluster(name, fmt.Errorf("engagement context ended while engaging: %w", ctx.Err()))
	}
}

// runsLocked reports whether the engine runs rec now: started, not stopping,
// and this replica owns it.
func (e *Engine) runsLocked(rec *record) bool {
	adm := e.opts.Admission
	switch {
	case e.base.Err() != nil:
		return false
	case e.ctx == nil:
		return adm == nil && rec.member != nil && rec.member.adopted // see admitLocked
	}
	return adm == nil || adm.Owns(rec.name)
}

// ownLocked ties an adopted member to its provider's ctx: when ctx ends, the
// member is removed, unless it was re-owned or replaced meanwhile.
func (e *Engine) ownLocked(rec *record, m *Member, ctx context.Context) {
	if rec.owner != nil {
		rec.owner.stop()
	}
	o := &owner{ctx: ctx}
	rec.owner = o
	o.stop = context.AfterFunc(ctx, func() { e.ownerDone(rec, m, o) })
}

func (e *Engine) ownerDone(rec *record, m *Member, o *owner) {
	e.mu.Lock()
	if rec.owner != o || rec.member != m || !e.records.is(rec.name, rec) {
		e.mu.Unlock()
		return
	}
	stop, release := e.removeLocked(rec, "provider-stopped")
	e.mu.Unlock()
	e.teardownAndRelease(rec.name, stop, "provider-stopped", release)
}

// notifyLocked answers the Engage calls waiting for m (every one if m is nil).
func (e *Engine) notifyLocked(rec *record, m *Member, err error) {
	kept := rec.waiters[:0]
	for _, w := range rec.waiters {
		if m == nil || w.m == m {
			w.done <- err
		} else {
			kept = append(kept, w)
		}
	}
	clear(rec.waiters[len(kept):])
	rec.waiters = kept
}

// errSuperseded is returned by engage when a newer decision made the
// engagement stale.
func errSuperseded(name multicluster.ClusterName) error {
	return multicluster.WithCluster(name, errors.New("replaced or removed while engaging"))
}

// engage engages in with every subscriber, all or nothing, and makes it the
// record's current instance; the instance it replaces is torn down. Every
// instance, built or adopted, is engaged here.
func (e *Engine) engage(rec *record, gen uint64, in *instance) error {
	defer e.engLocks.lock(rec.name)()
	unlock := e.lockRecord(rec)
	if rec.gen != gen || !e.records.is(rec.name, rec) || in.run.Err() != nil {
		unlock()
		return errSuperseded(rec.name)
	}
	if in.dead() {
		// Its Start returned: a watch registered now would never sync.
		unlock()
		return multicluster.WithCluster(rec.name, errors.New("its cache stopped running; it is not engaged"))
	}
	if rec.cur == nil && rec.state != StateDisconnected {
		e.transitionLocked(rec, StateStarting, "engaging")
	}
	in.eng, in.disengage = context.WithCancel(context.WithValue(in.run, engagedBy{}, e))
	rec.engaging = in
	subs := e.subs[:len(e.subs):len(e.subs)]
	unlock()
	defer func() {
		unlock := e.lockRecord(rec)
		if rec.engaging == in {
			rec.engaging = nil
		}
		unlock()
	}()

	err := engageAll(in.eng, rec.name, in.cl, subs)
	for err == nil {
		for i := range subs {
			in.offer(i)
		}
		e.mu.RLock()
		rec.mu.Lock()
		if rec.gen != gen || !e.records.is(rec.name, rec) || in.run.Err() != nil {
			rec.mu.Unlock()
			e.mu.RUnlock()
			in.disengage()
			return errSuperseded(rec.name)
		}
		if in.dead() {
			// Its Start returned while it was engaged: it is not made current.
			rec.mu.Unlock()
			e.mu.RUnlock()
			err = errors.New("stopped running while it was engaged") // named below
			break
		}
		if len(e.subs) > len(subs) {
			// Subscribed meanwhile: they did not see this instance.
			more := e.subs[len(subs):len(e.subs):len(e.subs)]
			subs = e.subs[:len(e.subs):len(e.subs)]
			rec.mu.Unlock()
			e.mu.RUnlock()
			err = engageAll(in.eng, rec.name, in.cl, more)
			continue
		}
		old := rec.cur
		rec.cur, rec.failures, rec.backoff = in, 0, 0
		if rec.next == in {
			rec.next = nil
		}
		if old != nil && old != in {
			// Replaced: reconciles may still hold it.
			rec.keepWhileHeld(old)
		}
		e.transitionLocked(rec, StateEngaged, "engaged with every controller and runnable")
		e.notifyLocked(rec, in.member, nil)
		member := rec.member
		rec.mu.Unlock()
		// Scheduled once engaged (the scheduler skips a record that is not),
		// still under the engine's read lock, so that no exclusive change of
		// the record comes in between.
		e.probes.schedule(rec, time.Now().Add(e.probeInterval()))
		e.mu.RUnlock()
		metrics.Engagements.WithLabelValues("success").Inc()
		switch {
		case old == nil || old == in:
		case old.stopped != nil && old.stopped == in.stopped:
			// The same run engaged again: only the old engagement ends.
			if old.disengage != nil {
				old.disengage()
			}
		default:
			e.teardown(rec.name, old, "replaced")
		}
		if member != nil && member.Report != nil {
			member.Report(nil)
		}
		return nil
	}

	// Refused: nobody keeps the new instance. Subscribers that had replaced the
	// previous instance with it take the previous one back.
	in.disengage()
	metrics.Engagements.WithLabelValues("failure").Inc()
	e.mu.RLock()
	rec.mu.RLock()
	old := rec.cur
	rec.mu.RUnlock()
	e.mu.RUnlock()
	if old != nil && old != in && old.eng != nil && old.eng.Err() == nil {
		if ferr := engageAll(old.eng, rec.name, old.cl, subs); ferr != nil {
			e.log.Error(ferr, "Failed to engage the previous cluster again after its replacement was refused", "cluster", rec.name)
		}
	}
	// Named once, here: a subscriber's own naming of the cluster (a
	// controller's Engage names it for callers that do not) is taken off.
	return multicluster.WithCluster(rec.name, err)
}

// engageAll engages every subscriber concurrently and joins their errors.
func engageAll(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster, subs []multicluster.Aware) error {
	switch len(subs) {
	case 0:
		return nil
	case 1:
		return subs[0].Engage(ctx, name, cl)
	}
	errs := make([]error, len(subs))
	var wg sync.WaitGroup
	for i, s := range subs {
		wg.Go(func() { errs[i] = s.Engage(ctx, name, cl) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// teardown ends an instance's engagement and its run: the cluster itself if
// the engine runs it (a cluster the application or provider started itself
// keeps running; only its engagement ends).
func (e *Engine) teardown(name multicluster.ClusterName, in *instance, why string) {
	if in.disengage != nil && in.eng.Err() == nil {
		metrics.Disengagements.WithLabelValues(why).Inc()
	}
	if in.disengage != nil {
		in.disengage()
	}
	in.stopRun()
	_ = name
}

// Hold marks a reconcile against name in flight: the cluster's fence is not
// released before done is called (bounded by Options.DrainTimeout).
// engagement is the context the reconciling subscriber was engaged with. It
// returns the engagement's context, which ends when the cluster is
// disengaged; ok is false if the reconcile must not run: the engine knows
// name but does not run it here. A cluster the engine does not know (the
// host, or a cluster engaged with the subscriber by something else) needs no
// hold.
//
// A reconcile of a cluster this engine engaged never runs unheld: once the
// engine let go of it (removed, handed away, disconnected, stopped), even a
// name it has forgotten since, ok is false and the request is dropped.
func (e *Engine) Hold(engagement context.Context, name multicluster.ClusterName) (engaged context.Context, done func(), ok bool) {
	if engaged, done, ok := e.hold(name); ok {
		return engaged, done, true
	}
	if engagement != nil && engagement.Value(engagedBy{}) == e {
		return nil, nil, false
	}
	if _, known := e.State(name); known {
		return nil, nil, false
	}
	return engagement, func() {}, true
}

// engagedBy is the key of the engine's value in every engagement's context.
type engagedBy struct{}

func (e *Engine) hold(name multicluster.ClusterName) (engaged context.Context, done func(), ok bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	rec, ok := e.records.get(name)
	if !ok {
		return nil, nil, false
	}
	rec.mu.RLock()
	defer rec.mu.RUnlock()
	var in *instance
	switch {
	case rec.engaging != nil && rec.engaging.eng.Err() == nil:
		in = rec.engaging
	case rec.state == StateEngaged && rec.cur != nil && rec.cur.eng != nil:
		in = rec.cur
	default:
		return nil, nil, false
	}
	in.inflight.add()
	h := &hold{in: in}
	return in.eng, h.release, true
}
