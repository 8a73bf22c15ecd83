package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/internal/redact"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// errSuperseded reports an attempt that a newer wish made pointless.
func errSuperseded(name multicluster.ClusterName) error {
	return multicluster.WithCluster(name, errors.New("replaced or removed while engaging"))
}

// attemptStepLocked builds, starts and syncs an instance of m, then engages
// it with every subscriber, all or nothing, and makes it rec's current
// instance, replacing the one before. A failure is retried with backoff; a
// cluster that never engaged is disconnected meanwhile.
func (e *Engine) attemptStepLocked(rec *record, m *Member) step {
	parent := e.base
	if rec.fence != nil {
		parent = rec.fence.ctx
	}
	if rec.cur == nil && rec.state != StateDisconnected {
		e.transitionLocked(rec, StateStarting, "starting")
	}
	life := lifeLocked(m, e.base)
	ctx, cancel := rec.stepContext(parent)
	return func() {
		in, err := e.start(ctx, rec, m, parent, life)
		if err == nil {
			err = e.engage(ctx, rec, in)
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		superseded := ctx.Err() != nil
		doneLocked(rec, ctx, cancel)
		if err == nil {
			return
		}
		if in != nil {
			rec.retire(in)
		}
		if superseded || rec.gone || e.closing {
			return // looked at again: what it worked for is no longer wanted
		}
		// What the member said, which may echo the credentials it was sent,
		// goes nowhere unredacted: not the status, log, Events (Report).
		err = redact.Known.ClusterErr(rec.name, err)
		rec.note.failed(time.Now(), err)
		if rec.cur == nil {
			e.transitionLocked(rec, StateDisconnected, "could not be started: "+err.Error())
		}
		e.retryAfterLocked(rec, rec.nextBackoff(e.opts))
		e.log.Error(err, "Failed to start cluster, retrying", "cluster", rec.name, "retryIn", rec.backoff.String())
		rec.notifyLocked(m, err)
		if report := m.Report; report != nil {
			e.wg.Go(func() { report(err) })
		}
	}
}

// retire lets go of an instance that is no longer current or being
// engaged: reconciles handed it may still run, so it stays on the books
// (runs) until they return. Under the engine's lock.
func (rec *record) retire(in *instance) {
	in.teardown()
	if in.member != rec.member && (rec.cur == nil || rec.cur.member != in.member) {
		endLife(in.member)
	}
}

// start builds the member's cluster, starts it and waits for its cache,
// bounded by CacheSyncTimeout. The instance it returns with an error is
// retired by the caller.
func (e *Engine) start(ctx context.Context, rec *record, m *Member, parent, life context.Context) (*instance, error) {
	cl, err := runBuild(ctx, life, e.opts.CacheSyncTimeout, m.Build)
	if err != nil {
		return nil, multicluster.WithCluster(rec.name, fmt.Errorf("building: %w", err))
	}
	// Its credentials, to redact by value from what it says (below, health).
	redact.Known.RememberConfig(rec.name, cl.GetConfig())
	in := &instance{cl: cl, member: m, stopped: make(chan struct{})}
	b, lent := cl.(*borrowed)
	if lent {
		in.cl = b.Cluster
	}
	in.run, in.stopRun = context.WithCancel(parent)
	if err := e.index(ctx, rec, in, life); err != nil {
		in.stopRun()
		return nil, err
	}
	// On the books before it starts, so that whoever takes the record's fence
	// away stops and waits for it.
	e.mu.Lock()
	if rec.gone || e.closing {
		e.mu.Unlock()
		in.stopRun()
		return nil, errSuperseded(rec.name)
	}
	rec.track(in)
	if !lent {
		e.wg.Go(func() {
			if in.runCluster(rec.name, e.log.WithValues("cluster", rec.name)) {
				e.mu.Lock()
				e.kickLocked(rec)
				e.mu.Unlock()
			}
		})
		e.mu.Unlock()
	} else {
		e.watchLent(rec, in, b)
		if b.begin != nil {
			b.begin(e.wg.Go)
		}
		e.mu.Unlock()
		if b.synced {
			return in, nil
		}
	}

	syncCtx, cancelSync := context.WithTimeout(in.run, e.opts.CacheSyncTimeout)
	defer cancelSync()
	stopSync := context.AfterFunc(ctx, cancelSync)
	defer stopSync()
	synced := make(chan bool, 1)
	go func() { synced <- in.cl.GetCache().WaitForCacheSync(syncCtx) }()
	select {
	case ok := <-synced:
		switch {
		case ctx.Err() != nil:
			return in, errSuperseded(rec.name)
		case !ok && parent.Err() != nil:
			return in, multicluster.WithCluster(rec.name, errors.New("stopped while its cache was syncing"))
		case !ok:
			return in, multicluster.WithCluster(rec.name, fmt.Errorf("cache did not sync within %s", e.opts.CacheSyncTimeout))
		}
		return in, nil
	case <-in.stopped:
		cancelSync()
		<-synced
		return in, multicluster.WithCluster(rec.name, errors.New("stopped before its cache synced"))
	}
}

// index applies the indexes of in's member (Member.Indexes) to its
// cluster before its cache starts. A built cluster is tracked for the
// indexes registered later until in's run ends, and fails its attempt if it
// cannot take one; a lent one until its member's life ends, as it runs on
// between runs here, and an index it cannot take is logged: attempts would
// not change that.
func (e *Engine) index(ctx context.Context, rec *record, in *instance, life context.Context) error {
	x := in.member.Indexes
	if x == nil {
		return nil
	}
	engaged := func() bool {
		cl, ok := e.Lookup(rec.name)
		return ok && cl == in.cl
	}
	untrack, err := x.apply(ctx, rec.name, in.cl, engaged)
	lent := in.member.lent()
	if untrack != nil {
		if lent {
			context.AfterFunc(life, untrack)
		} else {
			context.AfterFunc(in.run, untrack)
		}
	}
	switch {
	case err == nil:
		return nil
	case lent:
		e.log.Error(err, "Failed to index cluster", "cluster", rec.name)
		return nil
	}
	return multicluster.WithCluster(rec.name, err)
}

// watchLent ties in, an instance of a lent cluster, which runs outside
// the instance: in stops with its run, or when the lent cluster stops, then
// as exited if it stopped on its own while in should have run. Under the
// engine's lock.
func (e *Engine) watchLent(rec *record, in *instance, b *borrowed) {
	var once sync.Once
	stop := func() { once.Do(func() { close(in.stopped) }) }
	unwatch := func() bool { return false }
	if b.dead != nil {
		unwatch = context.AfterFunc(b.dead, func() {
			if cause := context.Cause(b.dead); in.run.Err() == nil && !errors.Is(cause, errLifeEnded) {
				in.exited.Store(true)
				e.log.Error(redact.Known.ClusterErr(rec.name, cause), "Cluster stopped running", "cluster", rec.name)
			}
			stop()
			if in.exited.Load() {
				e.mu.Lock()
				e.kickLocked(rec)
				e.mu.Unlock()
			}
		})
	}
	context.AfterFunc(in.run, func() { unwatch(); stop() })
}

// runCluster runs in's cluster: the one goroutine per cluster, as Start
// blocks while the cluster runs. It reports whether the cluster exited on
// its own, while the instance should have run.
func (in *instance) runCluster(name multicluster.ClusterName, log logr.Logger) (exited bool) {
	err := in.cl.Start(in.run)
	if AlreadyStarted(err) {
		// The application runs this cluster itself (upstream's examples start
		// the cluster they hand to a provider): it runs as long as the
		// instance does.
		<-in.run.Done()
		err = nil
	}
	// Its informers have stopped: let go of their idle connections, so that
	// a removed cluster leaves no connection goroutines behind.
	if hc := in.cl.GetHTTPClient(); hc != nil {
		hc.CloseIdleConnections()
	}
	if in.run.Err() == nil {
		in.exited.Store(true)
		if err != nil {
			log.Error(redact.Known.ClusterErr(name, err), "Cluster stopped running")
		}
	}
	// Closed after exited is set: an engagement in flight either sees the
	// instance dead when it makes it current (and refuses it), or made it
	// current before, and the engine's next look disconnects it.
	close(in.stopped)
	return in.exited.Load()
}

// runBuild runs a member's Build, bounded by timeout. Building may run a
// credential plugin, which client-go starts without a time limit: a plugin
// that hangs costs one abandoned goroutine until it exits, never the
// cluster's retries or the engine's shutdown.
func runBuild(ctx, life context.Context, timeout time.Duration, b func(context.Context) (cluster.Cluster, error)) (cluster.Cluster, error) {
	type result struct {
		cl  cluster.Cluster
		err error
	}
	done := make(chan result, 1)
	go func() {
		cl, err := b(life)
		done <- result{cl, err}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case r := <-done:
		if r.err == nil && r.cl == nil {
			r.err = errors.New("the member's Build returned no cluster")
		}
		return r.cl, r.err
	case <-timer.C:
		return nil, fmt.Errorf("did not finish within %s", timeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// engage engages in with every subscriber, all or nothing, and makes it the
// record's current instance; the instance it replaces is retired.
func (e *Engine) engage(ctx context.Context, rec *record, in *instance) error {
	e.mu.Lock()
	if ctx.Err() != nil || rec.gone {
		e.mu.Unlock()
		return errSuperseded(rec.name)
	}
	if in.dead() {
		e.mu.Unlock()
		return multicluster.WithCluster(rec.name, errors.New("its cache stopped running; it is not engaged"))
	}
	in.eng, in.disengage = context.WithCancel(context.WithValue(in.run, engagedBy{}, e))
	stopOnCancel := context.AfterFunc(ctx, in.disengage)
	rec.engaging = in
	publishLocked(rec)
	subs := e.subs[:len(e.subs):len(e.subs)]
	e.mu.Unlock()

	err := engageAll(in.eng, rec.name, in.cl, subs)
	for err == nil {
		in.offered = len(subs)
		e.mu.Lock()
		switch {
		case ctx.Err() != nil || rec.gone:
			err = errSuperseded(rec.name)
		case in.dead():
			err = errors.New("stopped running while it was engaged")
		case len(e.subs) > len(subs):
			// Subscribed meanwhile: they did not see this instance.
			more := e.subs[len(subs):len(e.subs):len(e.subs)]
			subs = e.subs[:len(e.subs):len(e.subs)]
			e.mu.Unlock()
			err = engageAll(in.eng, rec.name, in.cl, more)
			continue
		default:
			stopOnCancel()
			old := rec.cur
			rec.cur, rec.engaging = in, nil
			rec.failures.Store(0)
			rec.backoff, rec.answering = 0, false
			if old != nil {
				rec.retire(old)
			}
			e.transitionLocked(rec, StateEngaged, "engaged with every controller and runnable")
			rec.notifyLocked(in.member, nil)
			e.health.queue.schedule(rec, time.Now().Add(e.health.probeInterval()))
			report := in.member.Report
			e.mu.Unlock()
			metrics.Engagements.WithLabelValues("success").Inc()
			if report != nil {
				report(nil)
			}
			return nil
		}
		e.mu.Unlock()
		break
	}

	// Refused: nobody keeps the new instance. Subscribers that had replaced
	// the previous instance with it take the previous one back.
	stopOnCancel()
	in.disengage()
	metrics.Engagements.WithLabelValues("failure").Inc()
	e.mu.Lock()
	if rec.engaging == in {
		rec.engaging = nil
		publishLocked(rec)
	}
	old := rec.cur
	e.mu.Unlock()
	if old != nil && old.eng != nil && old.eng.Err() == nil {
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

// catchUpStepLocked engages the subscribers added since in was engaged.
// Their errors are logged and counted, not returned: the cluster stays
// engaged with everyone else.
func (e *Engine) catchUpStepLocked(rec *record, in *instance) step {
	more := e.subs[in.offered:len(e.subs):len(e.subs)]
	return func() {
		var wg sync.WaitGroup
		for _, a := range more {
			wg.Go(func() {
				if err := a.Engage(in.eng, rec.name, in.cl); err != nil && in.eng.Err() == nil {
					metrics.Engagements.WithLabelValues("failure").Inc()
					e.log.Error(err, "Failed to engage a cluster with a runnable added late", "cluster", rec.name)
				}
			})
		}
		wg.Wait()
		e.mu.Lock()
		in.offered += len(more)
		e.mu.Unlock()
	}
}

// Subscribe engages a with every engaged cluster now and every cluster
// engaged later. It returns once a has been offered the current ones,
// concurrently; their errors are logged and counted, not returned: the
// clusters stay engaged with everyone else. A cluster whose engagement is in
// flight is offered to a by that engagement, never twice, and Subscribe does
// not wait for it.
func (e *Engine) Subscribe(a multicluster.Aware) {
	e.mu.Lock()
	e.subs = append(e.subs, a)
	var now []step
	var recs []*record
	for rec := range e.records.all() {
		if rec.busy || rec.gone || rec.state != StateEngaged || rec.cur == nil || rec.cur.offered >= len(e.subs) {
			e.kickLocked(rec)
			continue
		}
		// Its turn, taken here: the catch-up is this name's step.
		rec.busy = true
		now = append(now, e.catchUpStepLocked(rec, rec.cur))
		recs = append(recs, rec)
	}
	e.mu.Unlock()
	var wg sync.WaitGroup
	for i, catchUp := range now {
		wg.Go(func() {
			catchUp()
			e.mu.Lock()
			recs[i].busy = false
			e.kickLocked(recs[i])
			e.mu.Unlock()
		})
	}
	wg.Wait()
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
	known := false
	if rec, found := e.records.get(name); found {
		for {
			v := rec.view.Load()
			known = v.state != StateGone && v.state != ""
			in := v.in
			if in == nil || in.eng == nil || in.eng.Err() != nil {
				break
			}
			// Counted, then checked still handed out: whoever takes the
			// instance away publishes that first and waits for the count
			// after, so that it either sees this hold or this hold sees it gone.
			in.inflight.add()
			if rec.view.Load() == v && in.eng.Err() == nil {
				h := &hold{in: in}
				return in.eng, h.release, true
			}
			in.inflight.done()
		}
	}
	if known || (engagement != nil && engagement.Value(engagedBy{}) == e) {
		return nil, nil, false
	}
	return engagement, func() {}, true
}

// engagedBy is the key of the engine's value in every engagement's context.
type engagedBy struct{}
