package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// SetMember adds or updates a desired member. Before the engine runs, members
// wait in StateWanted.
func (e *Engine) SetMember(m Member) {
	if (m.Build == nil) == (m.Cluster == nil) {
		e.log.Error(errors.New("exactly one of Build and Cluster must be set"), "Ignoring member", "cluster", m.Name)
		return
	}
	m.adopted = false
	// Under the read lock and the record's: a provider publishing its fleet
	// at start-up does not hold up the attempts it started already.
	rec, unlock := e.lockNewRecord(m.Name)
	defer unlock()
	if rec.member != nil && rec.member.adopted && rec.owner != nil && rec.owner.ctx.Err() != nil {
		// Its provider let go of it already (the removal is on its way): the
		// published member replaces it.
		rec.owner.stop()
		rec.owner = nil
		rec.member = nil
	}
	if rec.member != nil && rec.member.adopted {
		e.log.Error(errors.New("the name is engaged by a provider through Engage; a name has one source"), "Ignoring member", "cluster", m.Name)
		return
	}
	if rec.member != nil && rec.member.Hash == m.Hash {
		rec.member.Report, rec.member.Refresh = m.Report, m.Refresh
		return
	}
	rec.member = &m
	if rec.state == "" {
		e.transitionLocked(rec, StateWanted, "published by its provider")
	}
	e.admitLocked(rec)
}

// RemoveMember removes a member: it is disengaged and torn down.
func (e *Engine) RemoveMember(name multicluster.ClusterName) {
	e.mu.Lock()
	rec, ok := e.records.get(name)
	if !ok {
		e.mu.Unlock()
		return
	}
	stop, release := e.removeLocked(rec, "removed by its provider")
	e.mu.Unlock()
	e.teardownAndRelease(name, stop, "removed", release)
}

// attemptLocked starts building and starting rec's member, abandoning any
// attempt in flight. Under the engine's exclusive lock, or lockRecord.
func (e *Engine) attemptLocked(rec *record) {
	rec.gen++
	gen := rec.gen
	if rec.retry != nil {
		rec.retry.Stop()
		rec.retry = nil
	}
	if old := rec.next; old != nil {
		rec.next = nil
		e.retireLocked(rec, old, "replaced")
	}
	e.stopStaleRunsLocked(rec)
	if rec.cur == nil && rec.state != StateDisconnected {
		e.transitionLocked(rec, StateStarting, "starting")
	}
	mp := rec.member
	m := *mp
	parent := e.base
	if rec.fence != nil {
		parent = rec.fence
	}
	rec.attempting = gen
	e.wg.Go(func() { e.attempt(rec, gen, mp, m, parent) })
}

// attemptEnded notes that the attempt of gen is no longer on its way.
func (e *Engine) attemptEnded(rec *record, gen uint64) {
	defer e.lockRecord(rec)()
	if rec.attempting == gen {
		rec.attempting = 0
	}
}

// attempt builds, starts and syncs one instance of a member, then engages it.
func (e *Engine) attempt(rec *record, gen uint64, mp *Member, m Member, parent context.Context) {
	defer e.attemptEnded(rec, gen)
	in, err := e.start(rec, gen, mp, m, parent)
	if err == nil {
		unlock := e.lockRecord(rec)
		if rec.gen != gen {
			unlock()
			e.retire(rec, in, "replaced")
			return
		}
		rec.next = in
		unlock()
		err = e.engage(rec, gen, in)
		if err != nil {
			e.retire(rec, in, "engagement refused")
		}
	}
	if err == nil {
		return
	}
	// Under the record's lock: a fleet failing to start under load must not
	// queue every attempt and reconciler behind the engine's exclusive lock.
	defer e.lockRecord(rec)()
	if rec.gen != gen || !e.records.is(rec.name, rec) || parent.Err() != nil {
		// Superseded, or its fence (or the engine) ended, which is handled
		// where that is noticed: the error belongs to an attempt nobody waits for.
		return
	}
	if rec.next == in {
		rec.next = nil
	}
	if rec.backoff == 0 {
		rec.backoff = e.opts.MinBackoff
	} else {
		rec.backoff = min(2*rec.backoff, e.opts.MaxBackoff)
	}
	if rec.cur == nil {
		e.transitionLocked(rec, StateDisconnected, "could not be started: "+err.Error())
	}
	e.log.Error(err, "Failed to start cluster, retrying", "cluster", rec.name, "retryIn", rec.backoff.String())
	e.notifyLocked(rec, mp, err)
	if report := m.Report; report != nil {
		e.wg.Go(func() { report(err) })
	}
	rec.retry = time.AfterFunc(rec.backoff, func() {
		defer e.lockRecord(rec)()
		if rec.gen == gen && e.records.is(rec.name, rec) && e.base.Err() == nil {
			e.attemptLocked(rec)
		}
	})
}

// track puts in on rec's books (see record.runs), unless a newer decision
// made the attempt stale.
func (e *Engine) track(rec *record, gen uint64, in *instance) error {
	defer e.lockRecord(rec)()
	if rec.gen != gen {
		in.stopRun()
		return errSuperseded(rec.name)
	}
	rec.runs = append(slices.DeleteFunc(rec.runs, (*instance).finished), in)
	return nil
}

// start builds (or takes) the member's cluster, starts it and waits for its
// cache, bounded by CacheSyncTimeout.
func (e *Engine) start(rec *record, gen uint64, mp *Member, m Member, parent context.Context) (*instance, error) {
	run, stopRun := context.WithCancel(parent)
	in := &instance{hash: m.Hash, member: mp, run: run, stopRun: stopRun}
	if m.adopted {
		// Its provider started and synced it before Engage, and runs it: the
		// engine only engages it, as it always has.
		in.cl = m.Cluster
		if err := e.track(rec, gen, in); err != nil {
			return nil, err
		}
		return in, nil
	}
	in.stopped, in.appRuns = make(chan struct{}), new(atomic.Bool)
	var exited <-chan error  // the Start this attempt made
	var died <-chan struct{} // the Start of a run this attempt shares
	if m.Build != nil {
		cl, err := e.build(run, m.Build)
		if err != nil {
			stopRun()
			return nil, multicluster.WithCluster(rec.name, fmt.Errorf("building: %w", err))
		}
		in.cl, in.built = cl, true
		// Every cluster the engine runs is on the record's books before it
		// starts, so that whoever takes the record's fence away stops and
		// waits for it, even while this attempt has not reported back.
		if err := e.track(rec, gen, in); err != nil {
			return nil, err
		}
		exited = e.run(rec, in)
	} else {
		in.cl = m.Cluster
		shared, err := e.trackPrebuilt(rec, gen, mp, in)
		if err != nil {
			stopRun()
			return nil, err
		}
		if shared != nil {
			// Started by an earlier attempt, and still running.
			stopRun()
			in, run, stopRun = shared, shared.run, shared.stopRun
			died = in.stopped
		} else {
			exited = e.run(rec, in)
		}
	}

	syncCtx, cancel := context.WithTimeout(run, e.opts.CacheSyncTimeout)
	defer cancel()
	synced := make(chan bool, 1)
	go func() { synced <- in.cl.GetCache().WaitForCacheSync(syncCtx) }()
	for {
		select {
		case ok := <-synced:
			if ok {
				return in, nil
			}
			if parent.Err() != nil {
				stopRun()
				return nil, multicluster.WithCluster(rec.name, errors.New("stopped while its cache was syncing"))
			}
			if in.built {
				stopRun()
			} // else a pre-built cluster keeps running for the next attempt
			return nil, multicluster.WithCluster(rec.name, fmt.Errorf("cache did not sync within %s", e.opts.CacheSyncTimeout))
		case err := <-exited:
			if AlreadyStarted(err) {
				// The application runs this cluster itself (upstream's examples
				// start the cluster they hand to a provider): use it as it is.
				in.built = false // the application runs it, not the engine
				exited = nil
				continue
			}
			stopRun()
			cancel()
			<-synced
			return nil, multicluster.WithCluster(rec.name, fmt.Errorf("stopped before its cache synced: %w", errOrStopped(err)))
		case <-died:
			if !in.dead() {
				died = nil // the application runs it
				continue
			}
			cancel()
			<-synced
			return nil, multicluster.WithCluster(rec.name, errors.New("stopped running before its cache synced"))
		}
	}
}

// run starts in's cluster: the one goroutine per cluster, as Start blocks
// while the cluster runs. The channel gets what Start returned.
func (e *Engine) run(rec *record, in *instance) <-chan error {
	exited := make(chan error, 1)
	run := in.run
	e.wg.Go(func() {
		err := in.cl.Start(run)
		if AlreadyStarted(err) {
			// Before stopped is closed: whoever sees it closed (the cache may
			// sync before this answer is read below) must know it means
			// nothing.
			in.appRuns.Store(true)
		}
		if in.built {
			// Its informers have stopped: let go of their idle connections, so
			// that a removed cluster leaves no connection goroutines behind.
			if hc := in.cl.GetHTTPClient(); hc != nil {
				hc.CloseIdleConnections()
			}
		}
		// Closed before exited is called below: an engagement in flight
		// either sees it closed when it makes the instance current (and
		// refuses it), or made it current before, and exited disconnects it.
		close(in.stopped)
		exited <- err
		if AlreadyStarted(err) {
			return
		}
		if run.Err() == nil {
			e.exited(rec, in, err)
		}
	})
	return exited
}

// trackPrebuilt puts in, an instance of a pre-built member, on rec's books
// (see track), unless an earlier attempt of the member started its cluster:
// a cache starts once only, so that run is shared, and returned as a new
// instance; if it ended, the cluster cannot run again and an error says so.
// A cluster the application runs itself is taken as it is, each time.
func (e *Engine) trackPrebuilt(rec *record, gen uint64, mp *Member, in *instance) (*instance, error) {
	defer e.lockRecord(rec)()
	if rec.gen != gen {
		return nil, errSuperseded(rec.name)
	}
	if prev := mp.run; prev != nil && !prev.appRuns.Load() {
		if prev.run.Err() != nil || prev.dead() {
			return nil, multicluster.WithCluster(rec.name, errors.New("its cache stopped, and a pre-built cluster cannot be started again: its provider must publish a new one"))
		}
		return prev.share(), nil
	}
	mp.run = in
	rec.runs = append(slices.DeleteFunc(rec.runs, (*instance).finished), in)
	return nil, nil
}

// retire lets go of an instance whose attempt failed or was superseded (see
// retireLocked).
func (e *Engine) retire(rec *record, in *instance, why string) {
	defer e.lockRecord(rec)()
	e.retireLocked(rec, in, why)
}

// retireLocked lets go of an instance that an attempt made: it is torn down,
// unless it runs its record's pre-built member, which the next attempt
// engages again (a cache starts once only): then only its engagement ends.
// Its run ends when the record lets go of it (takeInstances), or when the
// member is replaced. Under the engine's exclusive lock, or lockRecord.
func (e *Engine) retireLocked(rec *record, in *instance, why string) {
	// Reconciles may still hold it (it was handed out while engaging).
	rec.keepWhileHeld(in)
	if e.keepsRunLocked(rec, in) {
		if in.disengage != nil {
			in.disengage()
		}
		return
	}
	e.wg.Go(func() { e.teardown(rec.name, in, why) })
}

// keepsRunLocked reports whether in runs rec's current pre-built member.
func (e *Engine) keepsRunLocked(rec *record, in *instance) bool {
	mp := in.member
	return mp != nil && mp == rec.member && mp.run != nil && mp.run.stopped == in.stopped &&
		!mp.run.appRuns.Load() && e.records.is(rec.name, rec)
}

// stopStaleRunsLocked stops the runs of pre-built members rec no longer
// wants, kept for attempts that will not come, unless subscribers still
// hold them (the current instance, torn down once replaced).
func (e *Engine) stopStaleRunsLocked(rec *record) {
	for _, r := range rec.runs {
		mp := r.member
		if mp == nil || mp == rec.member || mp.run != r || (rec.cur != nil && rec.cur.stopped == r.stopped) {
			continue
		}
		r.stopRun()
	}
}

// build runs a member's Build, bounded by CacheSyncTimeout. Building may run
// a credential plugin, which client-go starts without a time limit: a plugin
// that hangs costs one abandoned goroutine until it exits, never the
// cluster's retries or the engine's shutdown.
func (e *Engine) build(ctx context.Context, build func(context.Context) (cluster.Cluster, error)) (cluster.Cluster, error) {
	type result struct {
		cl  cluster.Cluster
		err error
	}
	done := make(chan result, 1)
	go func() {
		cl, err := build(ctx)
		done <- result{cl, err}
	}()
	timer := time.NewTimer(e.opts.CacheSyncTimeout)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.cl, r.err
	case <-timer.C:
		return nil, fmt.Errorf("did not finish within %s", e.opts.CacheSyncTimeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func errOrStopped(err error) error {
	if err == nil {
		return errors.New("cluster.Start returned")
	}
	return err
}

// exited handles a cluster whose Start returned while it should run: it is
// dead, so it is disconnected and, if the engine built it, built again.
func (e *Engine) exited(rec *record, in *instance, err error) {
	err = errOrStopped(err)
	e.mu.Lock()
	defer e.mu.Unlock()
	// By its stopped signal: an instance engaged again after an outage
	// carries it over.
	if rec.cur == nil || rec.cur.stopped != in.stopped || !e.records.is(rec.name, rec) || rec.state != StateEngaged {
		return
	}
	e.log.Error(err, "Cluster stopped running", "cluster", rec.name)
	e.disconnectLocked(rec, "start-failed: "+err.Error())
	if in.built && rec.member != nil {
		// A cluster the engine built is built again with backoff, whether or
		// not probes run.
		gen := rec.gen
		rec.retry = time.AfterFunc(rec.backoff, func() {
			e.mu.Lock()
			defer e.mu.Unlock()
			if rec.gen == gen && e.records.is(rec.name, rec) && e.base.Err() == nil && rec.state == StateDisconnected {
				e.attemptLocked(rec)
			}
		})
	}
}
