package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Every change of a name's wishes (published, removed, owned, answering)
// is written to its record under the lock and followed by kickLocked. The
// name's steps then run one at a time, in the goroutine that holds its turn:
// each looks at what is wanted and what runs (nextStepLocked), and takes the
// next step, the way a controller reconciles one key at a time. A step that
// a new wish makes pointless (an attempt for a member that was replaced,
// removed or handed away; an Acquire for a cluster owned elsewhere now) is
// cancelled (rec.cancel) and the name looked at again; the steps that let go
// of a cluster (stopping, draining, releasing its fence) always complete.

// step is the part of a name's work that calls out: it runs without the
// lock, in the name's turn.
type step func()

// kickLocked has rec looked at: if its turn is free and a step is due, a
// goroutine takes the turn and runs steps until none is due. A record whose
// turn is taken is looked at again once its step returns.
func (e *Engine) kickLocked(rec *record) {
	if rec.busy || e.closing {
		return
	}
	next := e.nextStepLocked(rec)
	if next == nil {
		return
	}
	rec.busy = true
	e.wg.Go(func() {
		for next != nil {
			next()
			e.mu.Lock()
			next = nil
			if !e.closing {
				next = e.nextStepLocked(rec)
			}
			rec.busy = next != nil
			e.mu.Unlock()
		}
	})
}

// mayRunLocked reports whether this replica may run m now: the engine runs,
// or m was adopted without sharding (its provider runs it, and subscribers
// remember it until they start); and this replica owns the name.
func (e *Engine) mayRunLocked(rec *record, m *Member) bool {
	adm := e.opts.Admission
	switch {
	case m == nil || e.base.Err() != nil:
		return false
	case e.ctx == nil:
		return adm == nil && m.adopted
	}
	return adm == nil || adm.Owns(rec.name)
}

// nextStepLocked compares what is wanted of rec with what runs, makes the
// changes that need no calling out, and returns the step that does, if any.
func (e *Engine) nextStepLocked(rec *record) step {
	if rec.gone {
		return nil
	}
	m := rec.member
	here := e.mayRunLocked(rec, m)
	fenceLost := rec.fence != nil && rec.fence.ctx.Err() != nil
	if !here || fenceLost {
		switch {
		case rec.fence != nil || len(rec.runs) > 0 || rec.cur != nil:
			return e.leaveLocked(rec)
		case m == nil:
			e.forgetLocked(rec, "removed by its provider")
		default:
			// Engage calls and Outcomes waiting here (for the fence, say)
			// hear nil, as they would have at once: the cluster is engaged
			// where it runs, and here when this replica may run it.
			rec.notifyLocked(nil, nil)
			if rec.state != StateWanted {
				e.transitionLocked(rec, StateWanted, "this replica does not run it")
			}
		}
		return nil
	}
	if rec.retry != nil {
		return nil // waiting for its backoff
	}
	if e.opts.Admission != nil && rec.fence == nil && e.ctx != nil {
		return e.acquireStepLocked(rec)
	}
	if rec.state == StateWanted || rec.state == "" || rec.state == StateGone {
		e.transitionLocked(rec, StateAdmitted, "this replica runs it")
	}
	cur := rec.cur
	switch {
	case cur == nil || cur.member != m:
		return e.attemptStepLocked(rec, m)
	case rec.state == StateEngaged && cur.exited.Load():
		e.disconnectLocked(rec, "start-failed: its cache stopped")
		e.retryAfterLocked(rec, rec.nextBackoff(e.opts))
	case rec.state == StateDisconnected && (rec.answering || cur.exited.Load()):
		return e.attemptStepLocked(rec, m)
	case rec.state == StateEngaged && cur.offered < len(e.subs):
		return e.catchUpStepLocked(rec, cur)
	}
	return nil
}

// nextBackoff returns the wait before rec's next attempt after a failure.
func (rec *record) nextBackoff(o Options) time.Duration {
	rec.backoff = min(max(2*rec.backoff, o.MinBackoff), o.MaxBackoff)
	return rec.backoff
}

// retryAfterLocked looks at rec again after d.
func (e *Engine) retryAfterLocked(rec *record, d time.Duration) {
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if rec.retry == t {
			rec.retry = nil
			e.kickLocked(rec)
		}
	})
	rec.retry = t
}

// supersede ends the step in flight, if it can be ended: what it works for
// is no longer wanted. A retry waiting for its backoff goes too. Under the
// engine's lock.
func (rec *record) supersede() {
	if rec.cancel != nil {
		rec.cancel()
		rec.cancel = nil
	}
	if rec.retry != nil {
		rec.retry.Stop()
		rec.retry = nil
	}
	rec.backoff, rec.acquireBackoff = 0, 0
}

// stepContext returns the context of a cancellable step. Under the
// engine's lock.
func (rec *record) stepContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	rec.cancel = cancel
	return ctx, cancel
}

// doneLocked marks the cancellable step of ctx as over.
func doneLocked(rec *record, ctx context.Context, cancel context.CancelFunc) {
	if ctx.Err() == nil {
		rec.cancel = nil
	}
	cancel()
}

// followOwnership looks at every name again each time the Admission's
// answers may have changed, changed being the channel read before the
// engine first looked. An ownership change is a wish like any other: the
// step in flight of a name now owned elsewhere (waiting for its fence,
// building or syncing it) is superseded, so that this replica neither takes
// a fence it no longer owns nor reconciles the cluster's initial list while
// the new owner waits for the fence.
func (e *Engine) followOwnership(ctx context.Context, changed <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		changed = e.opts.Admission.Changed()
		e.mu.Lock()
		for rec := range e.records.all() {
			if rec.cancel != nil && !e.mayRunLocked(rec, rec.member) {
				rec.supersede()
			}
			e.kickLocked(rec)
		}
		e.mu.Unlock()
	}
}

// SetMember adds or updates a desired member. Before the engine runs, members
// wait in StateWanted.
func (e *Engine) SetMember(m Member) {
	if set := btoi(m.Config != nil) + btoi(m.Build != nil) + btoi(m.Cluster != nil); set != 1 {
		e.ignore(m, errors.New("exactly one of Config, Build and Cluster must be set"))
		return
	}
	m.adopted = false
	var ep endpoint
	if m.Config != nil && !e.publishedAs(m.Name, m.Hash) {
		ep = endpointOf(&m) // outside the lock (see endpoint); most publications repeat a Hash
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	rec := e.records.getOrAdd(m.Name)
	if old := rec.member; old != nil && old.adopted {
		if old.owner == nil || old.owner.Err() == nil {
			e.ignore(m, errors.New("the name is engaged by a provider through Engage; a name has one source"))
			return
		}
		// Its provider let go of it already (the removal is on its way): the
		// published member replaces it.
	}
	if old := rec.member; old != nil && !old.adopted && old.Hash == m.Hash {
		old.Report, old.Refresh, old.Paused, old.Source = m.Report, m.Refresh, m.Paused, m.Source
		_, byName := e.paused[rec.name]
		rec.setPaused(byName || m.Paused, e.log)
		e.outcomeLocked(rec, old, m.Outcome)
		return
	}
	if m.Config != nil && ep.key == "" {
		ep = endpointOf(&m) // published meanwhile under another Hash
	}
	switch {
	case m.Cluster != nil:
		m.Build = prebuilt(m.Cluster)
	case m.Config != nil && e.connectLocked(rec, &m, ep):
		// Its credentials rotate into the cluster that runs: the member
		// published before stays, updated.
		_, byName := e.paused[rec.name]
		rec.setPaused(byName || m.Paused, e.log)
		e.outcomeLocked(rec, rec.member, m.Outcome)
		return
	}
	e.setMemberLocked(rec, &m, "published by its provider")
	e.outcomeLocked(rec, &m, m.Outcome)
}

// setMemberLocked makes m what rec's provider wants; nil removes it: it is
// disengaged and torn down, and the Engage calls waiting for it hear why.
func (e *Engine) setMemberLocked(rec *record, m *Member, why string) {
	if old := rec.member; old != nil {
		old.stopOwner()
		err := multicluster.WithCluster(rec.name, errors.New("replaced by another instance"))
		if m == nil {
			err = multicluster.WithCluster(rec.name, fmt.Errorf("removed while engaging (%s)", why))
		}
		rec.notifyLocked(old, err)
		if rec.cur == nil || rec.cur.member != old {
			endLife(old)
		}
	}
	rec.member = m
	if m == nil || m.Config == nil {
		rec.dropConnectionLocked()
	}
	if m != nil && (rec.state == "" || rec.state == StateGone) {
		e.transitionLocked(rec, StateWanted, why)
	}
	_, byName := e.paused[rec.name]
	rec.setPaused(byName || (m != nil && m.Paused), e.log)
	rec.supersede()
	e.kickLocked(rec)
}

// RemoveMember removes a member: it is disengaged and torn down.
func (e *Engine) RemoveMember(name multicluster.ClusterName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if rec, ok := e.records.get(name); ok && rec.member != nil {
		e.setMemberLocked(rec, nil, "removed by its provider")
	}
}

// SetPaused pauses or resumes the cluster of name, from code. A paused
// cluster stays engaged and its caches keep running (resuming costs no
// relist); controllers hold its requests, deduplicated, and reconcile each
// once when it is resumed; GetCluster still answers it; readiness does not
// wait for it. A cluster is paused while its name is paused here or its
// provider publishes it paused (Member.Paused). A name not known yet is
// paused when it is published.
func (e *Engine) SetPaused(name multicluster.ClusterName, paused bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if paused {
		e.paused[name] = struct{}{}
	} else {
		delete(e.paused, name)
	}
	if rec, ok := e.records.get(name); ok && !rec.gone {
		rec.setPaused(paused || (rec.member != nil && rec.member.Paused), e.log)
	}
}

// leaveLocked takes rec off this replica: its instances are torn down,
// then, once stopped and drained, its fence released.
func (e *Engine) leaveLocked(rec *record) step {
	stop := rec.runs
	f := rec.fence
	for _, in := range stop {
		if in.member != rec.member || !in.member.lent() {
			endLife(in.member) // replaced, removed, or built here: a lent cluster still wanted lives on
		}
	}
	if m := rec.member; m != nil && !m.lent() {
		endLife(m) // a Build in flight for this replica ends with it
	}
	rec.cur, rec.engaging, rec.runs, rec.fence = nil, nil, nil, nil
	rec.failures.Store(0)
	rec.answering = false
	why, to := "not-owned", StateWanted
	if rec.member == nil {
		why, to = "removed", StateGone
	}
	if !e.mayRunLocked(rec, rec.member) {
		// Engage calls waiting here return: the cluster is engaged where
		// it runs. Those of a cluster this replica still owns, whose fence
		// lapsed, wait for its next run here: their outcome is that one's.
		rec.notifyLocked(nil, nil)
	}
	e.transitionLocked(rec, to, why)
	e.health.release(rec)
	return func() {
		for _, in := range stop {
			if in.eng != nil && in.eng.Err() == nil {
				metrics.Disengagements.WithLabelValues(why).Inc()
			}
			in.teardown()
		}
		drain(e.log, e.opts.DrainTimeout, rec.name, stop)
		if f != nil {
			f.release()
		}
	}
}

// acquireStepLocked waits for the cluster's fence. A failed Acquire (the
// fence is still being released by this replica's previous run of the
// cluster, or renewal lapsed) is retried with backoff for as long as this
// replica owns the cluster.
func (e *Engine) acquireStepLocked(rec *record) step {
	ctx, cancel := rec.stepContext(e.ctx)
	return func() {
		fenced, release, err := e.opts.Admission.Acquire(ctx, rec.name)
		e.mu.Lock()
		defer e.mu.Unlock()
		superseded := ctx.Err() != nil
		doneLocked(rec, ctx, cancel)
		switch {
		case err != nil && superseded:
		case err != nil:
			rec.acquireBackoff = min(max(2*rec.acquireBackoff, e.opts.MinBackoff), e.opts.MaxBackoff)
			e.log.Error(err, "Failed to acquire the cluster's fence, retrying", "cluster", rec.name, "retryIn", rec.acquireBackoff.String())
			e.retryAfterLocked(rec, rec.acquireBackoff)
		case superseded || rec.gone || !e.mayRunLocked(rec, rec.member):
			e.wg.Go(release)
		default:
			rec.acquireBackoff = 0
			rec.fence = &fence{ctx: fenced, release: release}
			context.AfterFunc(fenced, func() {
				e.mu.Lock()
				defer e.mu.Unlock()
				if rec.fence != nil && rec.fence.ctx == fenced {
					rec.supersede()
					e.kickLocked(rec)
				}
			})
		}
	}
}

// disconnectLocked disengages rec's current instance from every subscriber
// and stops it; probes go on, with backoff, against its client.
func (e *Engine) disconnectLocked(rec *record, why string) {
	in := rec.cur
	rec.answering, rec.successes = false, 0
	now := time.Now()
	rec.disconnects = append(slices.DeleteFunc(rec.disconnects, func(t time.Time) bool { return now.Sub(t) > FlapWindow }), now)
	if len(rec.disconnects) == FlapThreshold {
		e.log.Info("Cluster is flapping: it needs more healthy answers in a row to be engaged again", "cluster", rec.name,
			"disconnections", len(rec.disconnects), "within", FlapWindow.String(), "healthyAnswersNeeded", e.health.successesNeeded(rec, now))
	}
	e.transitionLocked(rec, StateDisconnected, why)
	rec.backoff = e.opts.MinBackoff
	e.health.queue.schedule(rec, time.Now().Add(rec.backoff))
	if in.eng != nil && in.eng.Err() == nil {
		metrics.Disengagements.WithLabelValues("unhealthy").Inc()
	}
	in.teardown()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
