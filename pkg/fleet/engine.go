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
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// ErrNotOwned reports a cluster that sharding assigns to another replica.
//
// Deprecated: Engage no longer returns it: an adopted cluster owned
// elsewhere waits, as every member does, and is engaged once this replica
// owns it. Kept so that callers that test for it still build.
var ErrNotOwned = errors.New("cluster owned by another replica")

// Engine owns the lifecycle of every cluster of the fleet: one record per
// cluster name, one lock. See the package documentation.
type Engine struct {
	opts Options
	log  logr.Logger

	// mu guards everything below and, with each record's own lock (see
	// record), every record's fields. It is never held while calling out:
	// subscribers, Build, Report, Refresh and the network are called without
	// it.
	mu  sync.RWMutex    // read-locked by Get and State, which reconcilers call per request
	ctx context.Context // the engine's run; nil until Start
	// base is the parent of every cluster's run: it ends with the engine's
	// run, and exists before it for adopted clusters engaged before Start.
	base     context.Context
	stopBase context.CancelFunc
	records  recordMap
	subs     []multicluster.Aware // append-only
	ready    atomic.Bool          // startup readiness, latched; read without the lock
	started  time.Time            // when Start began: bounds the wait for Options.Listed
	overdue  sync.Once            // logs once that the provider's first listing is late
	adopted  uint64               // adopted instances so far: their members' hashes
	closing  bool                 // Start waits for wg: no more goroutines on it
	wg       sync.WaitGroup       // attempts, probes and cluster runs

	engLocks     nameLocks    // serializes each name's engagements with subscribers
	running      atomic.Int64 // records this replica runs (see runsHere): the probe budget's divisor
	stretched    atomic.Bool  // the probe budget stretched the interval (logged once)
	healthSeries metrics.SeriesCap
	probes       probeQueue // the probes to come; see health.go
}

// New returns an engine; run it with Start.
func New(opts Options) *Engine {
	opts = opts.withDefaults()
	e := &Engine{opts: opts, log: opts.Logger}
	e.base, e.stopBase = context.WithCancel(context.Background())
	e.healthSeries.Max = opts.MaxHealthSeries
	for _, st := range allStates {
		metrics.Clusters.WithLabelValues(string(st)).Add(0) // every state has a series, at zero
	}
	return e
}

// transitionLocked moves rec to state, logs and counts it.
func (e *Engine) transitionLocked(rec *record, to State, why string) {
	from := rec.state
	if from == to {
		return
	}
	rec.state = to
	if rec.changed != nil {
		close(rec.changed)
		rec.changed = nil
	}
	if from != "" {
		metrics.Clusters.WithLabelValues(string(from)).Dec()
	}
	if runsHere(from) != runsHere(to) {
		if runsHere(to) {
			e.running.Add(1)
		} else {
			e.running.Add(-1)
		}
	}
	if to != StateGone {
		metrics.Clusters.WithLabelValues(string(to)).Inc()
	}
	metrics.Transitions.WithLabelValues(string(from), string(to)).Inc()
	if to == StateEngaged || to == StateDisconnected {
		rec.settled.Store(true)
	}
	e.log.Info("Cluster "+string(to), "cluster", rec.name, "from", string(from), "reason", why)
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

// recordLocked returns name's record, creating it; under the exclusive lock.
func (e *Engine) recordLocked(name multicluster.ClusterName) *record {
	rec, _ := e.records.getOrAdd(name, &record{name: name})
	return rec
}

// lockNewRecord returns name's record, creating it, with the engine's read
// lock and the record's own taken (see lockRecord); a new record is not seen
// by anyone before its creator releases it.
func (e *Engine) lockNewRecord(name multicluster.ClusterName) (rec *record, unlock func()) {
	e.mu.RLock()
	rec, ok := e.records.get(name)
	if !ok {
		fresh := &record{name: name}
		fresh.mu.Lock()
		if rec, ok = e.records.getOrAdd(name, fresh); !ok {
			return rec, func() { rec.mu.Unlock(); e.mu.RUnlock() }
		}
		fresh.mu.Unlock()
	}
	rec.mu.Lock()
	return rec, func() { rec.mu.Unlock(); e.mu.RUnlock() }
}

// removeLocked takes rec out of the fleet. It returns the instances to tear
// down and the fence to release once they have stopped and drained.
func (e *Engine) removeLocked(rec *record, why string) (stop []*instance, release func()) {
	stop = rec.takeInstances()
	release = rec.releaseFence
	rec.fence, rec.releaseFence = nil, nil
	if rec.owner != nil {
		rec.owner.stop()
		rec.owner = nil
	}
	e.notifyLocked(rec, nil, multicluster.WithCluster(rec.name, fmt.Errorf("removed while engaging (%s)", why)))
	e.forgetLocked(rec, why)
	return stop, release
}

// forgetLocked removes rec from the fleet.
func (e *Engine) forgetLocked(rec *record, why string) {
	if !e.records.is(rec.name, rec) {
		return
	}
	e.records.remove(rec.name)
	rec.gen++
	if rec.retry != nil {
		rec.retry.Stop()
	}
	e.transitionLocked(rec, StateGone, why)
	e.releaseSeriesLocked(rec)
}

// releaseSeriesLocked drops the cluster's per-cluster series: it is gone, or
// run by another replica now. Under rec's lock or the engine's exclusive one.
func (e *Engine) releaseSeriesLocked(rec *record) {
	rec.healthGauge.Store(0) // written again by the next probe, if any
	if e.healthSeries.Release(rec.name) {
		metrics.Healthy.DeleteLabelValues(rec.name)
	}
	if e.opts.OnRelease != nil {
		e.opts.OnRelease(rec.name)
	}
}

// Get returns the engaged cluster of name. A disconnected cluster yields an
// error matching both multicluster.ErrClusterNotConnected and
// multicluster.ErrClusterNotFound; any other name ErrClusterNotFound.
func (e *Engine) Get(name multicluster.ClusterName) (cluster.Cluster, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	rec, ok := e.records.get(name)
	if !ok {
		return nil, multicluster.WithCluster(name, multicluster.ErrClusterNotFound)
	}
	rec.mu.RLock()
	defer rec.mu.RUnlock()
	switch {
	case rec.engaging != nil && rec.engaging.eng.Err() == nil:
		// Subscribers see it already (a controller's first reconciles run
		// while the others are still being engaged).
		return rec.engaging.cl, nil
	case rec.state == StateEngaged:
		return rec.cur.cl, nil
	case rec.state == StateDisconnected:
		return nil, multicluster.NotConnectedError(name)
	default:
		return nil, fmt.Errorf("cluster %q is %s: %w", name, rec.state, multicluster.ErrClusterNotFound)
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
	e.mu.RLock()
	defer e.mu.RUnlock()
	rec, ok := e.records.get(name)
	if !ok {
		return StateGone, false
	}
	rec.mu.RLock()
	defer rec.mu.RUnlock()
	return rec.state, true
}

// Changed returns a channel closed at name's next change of state: when it
// engages, is given up on (disconnected) or removed. For a name the engine
// does not know, the channel is closed already. Controllers wait on it for
// the clusters their requests name before those clusters have joined.
//
// It takes the record's own lock (a change of state holds it too), not the
// engine's exclusive lock: requests of thousands of joining clusters ask at
// once, and every reader of the fleet would queue behind each of them.
func (e *Engine) Changed(name multicluster.ClusterName) <-chan struct{} {
	e.mu.RLock()
	defer e.mu.RUnlock()
	rec, ok := e.records.get(name)
	if !ok {
		return closedChan
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.changed == nil {
		rec.changed = make(chan struct{})
	}
	return rec.changed
}

// Joining reports whether name is on its way to being engaged on this
// replica: published and admitted, starting, or wanted while this replica
// owns it (or runs everything).
func (e *Engine) Joining(name multicluster.ClusterName) bool {
	e.mu.RLock()
	rec, ok := e.records.get(name)
	var state State
	if ok {
		rec.mu.RLock()
		state = rec.state
		rec.mu.RUnlock()
	}
	e.mu.RUnlock()
	switch {
	case !ok:
		return false
	case state == StateAdmitted || state == StateStarting:
		return true
	case state == StateWanted:
		return e.opts.Admission == nil || e.opts.Admission.Owns(name)
	}
	return false
}

// Status is one cluster's state, for listings.
type Status struct {
	Name  multicluster.ClusterName
	State State
}

// Clusters lists every known cluster and its state, sorted by name.
func (e *Engine) Clusters() []Status {
	e.mu.RLock()
	out := make([]Status, 0, e.records.len())
	for rec := range e.records.all() {
		rec.mu.RLock()
		out = append(out, Status{Name: rec.name, State: rec.state})
		rec.mu.RUnlock()
	}
	e.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Ready is a healthz.Checker for startup readiness: it passes once the
// provider has published what it found at start-up (Options.Listed, waited for
// at most Options.ListingTimeout) and every cluster known that this replica
// owns is engaged or has been declared disconnected (a cluster waiting for
// its fence counts), and stays passing from then on. A dead member never holds it back beyond its first
// failed attempt.
//
// It reads under the read lock: a scan of every record must not stall the
// reconcilers' Get behind each probe of /readyz.
func (e *Engine) Ready(_ *http.Request) error {
	if e.ready.Load() {
		return nil
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.ctx == nil {
		return errors.New("the fleet engine has not started")
	}
	if err := e.listedLocked(); err != nil {
		return err
	}
	var waiting []string
	for rec := range e.records.all() {
		// A cluster this replica owns counts while it waits for its fence: in
		// a rolling update, the new pod is not ready while the old one still
		// holds its clusters.
		if rec.settled.Load() {
			continue
		}
		// A record being changed right now (its lock held) is on its way:
		// counted as waiting rather than waited for, so that a poll of /readyz
		// never waits for start-up's attempts.
		if !rec.mu.TryRLock() {
			waiting = append(waiting, rec.name)
			continue
		}
		if rec.state != StateWanted || e.runsLocked(rec) {
			waiting = append(waiting, rec.name)
		}
		rec.mu.RUnlock()
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

// listedLocked fails while the provider has not published what it found at
// start-up and ListingTimeout has not passed since Start. Without it, a
// replica would turn Ready with an empty fleet while its provider still lists.
func (e *Engine) listedLocked() error {
	if e.opts.Listed == nil {
		return nil
	}
	select {
	case <-e.opts.Listed:
		return nil
	default:
	}
	if waited := time.Since(e.started); waited < e.opts.ListingTimeout {
		return fmt.Errorf("the provider has not listed its clusters yet (waited %s of at most %s)", waited.Round(time.Second), e.opts.ListingTimeout)
	}
	e.overdue.Do(func() {
		e.log.Error(errors.New("the provider has not listed its clusters"), "Readiness no longer waits for the provider's first listing", "timeout", e.opts.ListingTimeout)
	})
	return nil
}

// Start runs the engine: members published so far start now, probes run
// until ctx ends; then every cluster is torn down and Start returns once all
// of them have stopped.
func (e *Engine) Start(ctx context.Context) error {
	// Taken before any ownership is looked at: a change after this read is
	// noticed between probe rounds; one between the look and a later read
	// would be lost until the next change.
	var admissionChanged <-chan struct{}
	if e.opts.Admission != nil {
		admissionChanged = e.opts.Admission.Changed()
	}
	e.mu.Lock()
	if e.ctx != nil {
		e.mu.Unlock()
		return fmt.Errorf("fleet engine: %w", multicluster.ErrAlreadyStarted)
	}
	e.ctx, e.started = ctx, time.Now()
	context.AfterFunc(ctx, e.stopBase)
	wanted := make([]*record, 0, e.records.len())
	for rec := range e.records.all() {
		if rec.state == StateWanted { // adopted clusters may run already
			wanted = append(wanted, rec)
		}
	}
	e.mu.Unlock()
	// Each admitted under the read lock and its own: the attempts started
	// here take the same locks, and do not wait for the rest of the fleet to
	// be admitted.
	for _, rec := range wanted {
		e.mu.RLock()
		rec.mu.Lock()
		if e.records.is(rec.name, rec) && rec.state == StateWanted {
			e.admitLocked(rec)
		}
		rec.mu.Unlock()
		e.mu.RUnlock()
	}

	e.runProbes(ctx, func() {
		// Between probe rounds: re-evaluate ownership when it changed.
		select {
		case <-admissionChanged:
			admissionChanged = e.opts.Admission.Changed()
			e.reassign()
		default:
		}
	})

	e.mu.Lock()
	var stop []*instance
	var releases []func()
	e.closing = true
	for rec := range e.records.all() {
		// Every record leaves with its instances, in one step under the
		// exclusive lock: a reader (a reconcile still draining asks for its
		// cluster) never finds a record engaged without an instance.
		e.notifyLocked(rec, nil, multicluster.WithCluster(rec.name, errors.New("the fleet engine stopped")))
		stop = append(stop, rec.takeInstances()...)
		if rec.releaseFence != nil {
			releases = append(releases, rec.releaseFence)
			rec.fence, rec.releaseFence = nil, nil
		}
		if rec.owner != nil {
			rec.owner.stop()
			rec.owner = nil
		}
		e.forgetLocked(rec, "the fleet engine stopped") // attempts in flight give up
	}
	e.mu.Unlock()
	for _, in := range stop {
		e.teardown("", in, "stopped")
	}
	// Fences go once every cluster this replica ran has stopped and drained,
	// so that the next owners can take over at once, and never while one
	// still runs.
	e.drain("", stop)
	for _, release := range releases {
		release()
	}
	e.wg.Wait()
	return nil
}

// NeedLeaderElection is false: every replica runs its share of the fleet.
func (e *Engine) NeedLeaderElection() bool { return false }
