package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/internal/redact"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// ErrNotOwned reports a cluster that sharding assigns to another replica.
//
// Deprecated: Engage no longer returns it: an adopted cluster owned
// elsewhere waits, as every member does, and is engaged once this replica
// owns it. Kept so that callers that test for it still build.
var ErrNotOwned = errors.New("cluster owned by another replica")

// Engine owns the lifecycle of every cluster of the fleet: one record per
// cluster name. See the package documentation.
type Engine struct {
	opts Options
	log  logr.Logger

	// mu guards every record's fields and the fields below. It is never held
	// while calling out (subscribers, Build, Report, Refresh, the network)
	// and never taken by readers, which load a record's view.
	mu      sync.Mutex
	ctx     context.Context // the engine's run; nil until Start
	started atomic.Bool     // ctx is set: read by readiness without the lock
	// base is the parent of every cluster's run: it ends with the engine's
	// run, and exists before it for adopted clusters engaged before Start.
	base     context.Context
	stopBase context.CancelFunc
	records  recordMap
	paused   map[multicluster.ClusterName]struct{} // names paused from code (SetPaused)
	subs     []multicluster.Aware                  // append-only
	adopted  uint64                                // adopted clusters so far: their members' hashes
	closing  bool                                  // Start is shutting down: no new steps
	wg       sync.WaitGroup                        // steps, cluster runs and callbacks

	began   time.Time // when Start began: bounds the wait for Options.Listed
	overdue sync.Once // logs once that the provider's first listing is late
	ready   atomic.Bool
	health  health
	// idle, if set, is called under mu when the last record is forgotten
	// (see Own): it must not block.
	idle func()
}

// New returns an engine; run it with Start.
func New(opts Options) *Engine {
	opts = opts.withDefaults()
	e := &Engine{opts: opts, log: opts.Logger, paused: map[multicluster.ClusterName]struct{}{}}
	e.base, e.stopBase = context.WithCancel(context.Background())
	e.health.opts, e.health.log = opts, opts.Logger
	e.health.queue.off = opts.Health.Disabled
	e.health.series.Max = opts.MaxHealthSeries
	e.health.live.init(e)
	for _, st := range allStates {
		metrics.Clusters.WithLabelValues(string(st)).Add(0) // every state has a series, at zero
	}
	return e
}

// transitionLocked moves rec to state, logs and counts it, and publishes it.
func (e *Engine) transitionLocked(rec *record, to State, why string) {
	from := rec.state
	if from != to {
		rec.state = to
		if from != "" && from != StateGone {
			metrics.Clusters.WithLabelValues(string(from)).Dec()
		}
		if runsHere(from) != runsHere(to) {
			if runsHere(to) {
				e.health.running.Add(1)
			} else {
				e.health.running.Add(-1)
			}
		}
		if to != StateGone {
			metrics.Clusters.WithLabelValues(string(to)).Inc()
		}
		metrics.Transitions.WithLabelValues(string(from), string(to)).Inc()
		if to == StateEngaged || to == StateDisconnected {
			rec.settled.Store(true)
		}
		now := time.Now()
		e.health.availabilityLocked(rec, from, to, now)
		rec.since = now
	}
	publishLocked(rec)
	if from != to {
		e.log.Info("Cluster "+string(to), "cluster", rec.name, "from", string(from), "reason", why)
	}
}

// publishLocked publishes what readers see of rec.
func publishLocked(rec *record) {
	old := rec.view.Load()
	v := &view{state: rec.state, probe: rec.cur, paused: rec.paused, since: rec.since}
	switch {
	case rec.engaging != nil:
		v.in = rec.engaging
	case rec.state == StateEngaged:
		v.in = rec.cur
	}
	if v.probe == nil || (v.state != StateEngaged && v.state != StateDisconnected) {
		v.probe = nil
	}
	if old != nil && old.state == v.state && old.paused == v.paused {
		v.changed = old.changed
	} else {
		v.changed = make(chan struct{})
		if old != nil {
			close(old.changed)
		}
	}
	rec.view.Store(v)
}

// runsHere reports the states of a cluster this replica runs, or is about to:
// the probe budget is shared between them from the start, so that a fleet
// starting up is not probed faster than it will be once up (a cluster that
// has just synced its cache has just shown that it answers).
func runsHere(s State) bool {
	switch s {
	case StateAdmitted, StateStarting, StateEngaged, StateDisconnected:
		return true
	}
	return false
}

// Get returns the engaged cluster of name. A disconnected cluster yields an
// error matching both multicluster.ErrClusterNotConnected and
// multicluster.ErrClusterNotFound; any other name ErrClusterNotFound.
func (e *Engine) Get(name multicluster.ClusterName) (cluster.Cluster, error) {
	v := e.records.view(name)
	switch {
	case v == nil:
		return nil, multicluster.WithCluster(name, multicluster.ErrClusterNotFound)
	case v.in != nil && v.in.eng != nil && v.in.eng.Err() == nil:
		// While it is being engaged too: subscribers see it already (a
		// controller's first reconciles run while the others are still being
		// engaged).
		return v.in.cl, nil
	case v.state == StateDisconnected:
		return nil, multicluster.NotConnectedError(name)
	default:
		return nil, fmt.Errorf("cluster %q is %s: %w", name, v.state, multicluster.ErrClusterNotFound)
	}
}

// Lookup returns the engaged cluster of name.
func (e *Engine) Lookup(name multicluster.ClusterName) (cluster.Cluster, bool) {
	cl, err := e.Get(name)
	return cl, err == nil
}

// State returns the lifecycle state of name; false if the engine does not
// know it (never seen, or gone).
func (e *Engine) State(name multicluster.ClusterName) (State, bool) {
	if v := e.records.view(name); v != nil {
		return v.state, true
	}
	return StateGone, false
}

// A Snapshot is what the engine knows of one name at one moment, read from
// one view of its record: the fields never disagree with each other.
type Snapshot struct {
	// State is the name's lifecycle state; StateGone if the engine does not
	// know it (never seen, or gone).
	State State
	// Paused: controllers hold the cluster's requests (see SetPaused).
	Paused bool
	// Joining: the name is on its way to being engaged on this replica:
	// published and admitted, starting, or wanted while this replica owns it
	// (or runs everything).
	Joining bool
	// Changed is closed at the name's next change of state or of pause: when
	// it engages, is given up on (disconnected), paused, resumed or removed.
	// For a name the engine does not know, it is closed already. Controllers
	// wait on it for the clusters their requests name before those clusters
	// have joined.
	Changed <-chan struct{}
}

// Snapshot returns what the engine knows of name; false if it does not know
// it.
func (e *Engine) Snapshot(name multicluster.ClusterName) (Snapshot, bool) {
	v := e.records.view(name)
	if v == nil {
		return Snapshot{State: StateGone, Changed: closedChan}, false
	}
	s := Snapshot{State: v.state, Paused: v.paused, Changed: v.changed}
	switch v.state {
	case StateAdmitted, StateStarting:
		s.Joining = true
	case StateWanted:
		s.Joining = e.opts.Admission == nil || e.opts.Admission.Owns(name)
	}
	return s, true
}

// Ready is a healthz.Checker for startup readiness: it passes once the
// provider has published what it found at start-up (Options.Listed, waited for
// at most Options.ListingTimeout) and every cluster known that this replica
// owns is engaged or has been declared disconnected (a cluster waiting for
// its fence counts), and stays passing from then on. A dead member never
// holds it back beyond its first failed attempt.
func (e *Engine) Ready(_ *http.Request) error {
	if e.ready.Load() {
		return nil
	}
	if !e.started.Load() {
		return errors.New("the fleet engine has not started")
	}
	// The provider's first listing: without it, a replica would turn Ready
	// with an empty fleet while its provider still lists.
	select {
	case <-e.opts.Listed: // a nil Listed blocks: the default below
	default:
		waited := time.Since(e.began)
		switch {
		case e.opts.Listed == nil:
		case waited < e.opts.ListingTimeout:
			return fmt.Errorf("the provider has not listed its clusters yet (waited %s of at most %s)", waited.Round(time.Second), e.opts.ListingTimeout)
		default:
			e.overdue.Do(func() {
				e.log.Error(errors.New("the provider has not listed its clusters"), "Readiness no longer waits for the provider's first listing", "timeout", e.opts.ListingTimeout)
			})
		}
	}
	var waiting []string
	for rec := range e.records.all() {
		// A cluster this replica owns counts while it waits for its fence: in
		// a rolling update, the new pod is not ready while the old one still
		// holds its clusters.
		if rec.settled.Load() {
			continue
		}
		switch v := rec.view.Load(); {
		case v.paused || v.state == StateGone || v.state == "":
			// Gone, or paused: readiness does not wait for it.
		case v.state == StateWanted:
			if e.opts.Admission == nil || e.opts.Admission.Owns(rec.name) {
				waiting = append(waiting, rec.name)
			}
		default:
			waiting = append(waiting, rec.name)
		}
	}
	if len(waiting) > 0 {
		sort.Strings(waiting)
		if len(waiting) > 5 {
			waiting = append(waiting[:5], "...")
		}
		return fmt.Errorf("%d clusters not engaged yet: %v", len(waiting), waiting)
	}
	e.ready.Store(true)
	return nil
}

// Start runs the engine: members published so far start now, probes run
// until ctx ends; then every cluster is torn down and Start returns once all
// of them have stopped.
func (e *Engine) Start(ctx context.Context) error {
	ownershipChanged, err := e.begin(ctx)
	if err != nil {
		return err
	}
	e.run(ctx, ownershipChanged)
	return nil
}

// begin is the part of Start that returns: once it has, members published
// are started, and a publication's Outcome waits for its engagement.
func (e *Engine) begin(ctx context.Context) (ownershipChanged <-chan struct{}, err error) {
	// Taken before any ownership is looked at: a change after this read is
	// seen by followOwnership; one between a look and a later read would be
	// lost until the next change.
	if e.opts.Admission != nil {
		ownershipChanged = e.opts.Admission.Changed()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ctx != nil {
		return nil, fmt.Errorf("fleet engine: %w", multicluster.ErrAlreadyStarted)
	}
	e.ctx, e.began = ctx, time.Now()
	e.started.Store(true)
	context.AfterFunc(ctx, e.stopBase)
	for rec := range e.records.all() {
		e.kickLocked(rec)
	}
	return ownershipChanged, nil
}

// run is the part of Start that blocks until ctx ends, then tears down.
func (e *Engine) run(ctx context.Context, ownershipChanged <-chan struct{}) {
	if e.opts.Admission != nil {
		e.wg.Go(func() { e.followOwnership(ctx, ownershipChanged) })
	}
	e.health.runProbes(ctx, e.answer)

	// Every record leaves with its instances, in one step under the lock: a
	// reader (a reconcile still draining asks for its cluster) never finds a
	// record engaged without an instance. Fences go once every cluster this
	// replica ran has stopped and drained, so that the next owners can take
	// over at once, and never while one still runs.
	e.mu.Lock()
	e.closing = true
	var stop []*instance
	var releases []func()
	for rec := range e.records.all() {
		if rec.cancel != nil {
			rec.cancel()
		}
		rec.notifyLocked(nil, multicluster.WithCluster(rec.name, errors.New("the fleet engine stopped")))
		stop = append(stop, rec.runs...)
		if rec.fence != nil {
			releases = append(releases, rec.fence.release)
		}
		e.forgetLocked(rec, "the fleet engine stopped")
	}
	e.mu.Unlock()
	for _, in := range stop {
		if in.eng != nil && in.eng.Err() == nil {
			metrics.Disengagements.WithLabelValues("stopped").Inc()
		}
		in.teardown()
	}
	drain(e.log, e.opts.DrainTimeout, "", stop)
	for _, release := range releases {
		release()
	}
	e.wg.Wait()
}

// forgetLocked takes rec out of the fleet with everything it holds (the
// caller tears down and drains what it ran).
func (e *Engine) forgetLocked(rec *record, why string) {
	if rec.gone {
		return
	}
	rec.gone = true
	e.records.remove(rec.name)
	if e.idle != nil && e.records.len() == 0 {
		e.idle()
	}
	if rec.retry != nil {
		rec.retry.Stop()
		rec.retry = nil
	}
	for _, in := range rec.runs {
		endLife(in.member)
	}
	endLife(rec.member)
	rec.dropConnectionLocked()
	rec.member, rec.cur, rec.engaging, rec.runs, rec.fence = nil, nil, nil, nil, nil
	e.transitionLocked(rec, StateGone, why)
	e.health.release(rec)
	redact.Known.Forget(rec.name)
	if rec.paused {
		metrics.Paused.DeleteLabelValues(rec.name)
	}
}

// drain waits for the clusters of stop to stop and for their reconciles in
// flight to return, the latter for at most DrainTimeout; an overrun is logged
// and counted, and the fence is released anyway: the next owner would take it
// over once it expires.
func drain(log logr.Logger, timeout time.Duration, name multicluster.ClusterName, stop []*instance) {
	for _, in := range stop {
		<-in.stopped
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for _, in := range stop {
		select {
		case <-in.inflight.wait():
		case <-timer.C:
			metrics.DrainOverruns.Inc()
			log.Error(fmt.Errorf("reconciles still running after %s", timeout),
				"Releasing the cluster's fence although reconciles against it have not returned", "cluster", name)
			return
		}
	}
}

// NeedLeaderElection is false: every replica runs its share of the fleet.
func (e *Engine) NeedLeaderElection() bool { return false }
