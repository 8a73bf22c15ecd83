package fleet

import (
	"context"
	"iter"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// record is one cluster name's place in the fleet.
//
// Its fields are changed either under the engine's exclusive lock, or under
// the engine's read lock together with the record's own mu; they are read
// under the engine's exclusive lock, or under its read lock with mu (read- or
// write-locked). Start-up, where thousands of clusters are started and engaged
// at once, takes the second way: attempts of different clusters never wait
// for each other; so do probes' answers. Lock order: the name's engagement lock (see nameLocks), the engine's lock,
// mu, the probe queue's lock; the probe scheduler, which holds the queue's
// lock, only tries a record's (TryRLock) and never waits for it.
type record struct {
	mu    sync.RWMutex
	name  multicluster.ClusterName
	state State
	// changed is closed, and cleared, at the next change of state (Changed);
	// nil while nobody waits for one.
	changed chan struct{}

	// member is what the provider wants: published with SetMember, or adopted
	// through Engage (member.adopted), then owner is the provider's context the
	// member lives within. Every record has a member.
	member  *Member
	owner   *owner
	waiters []*waiter // Engage calls waiting for their member's first engagement

	// cur is the instance subscribers were engaged with (engaged or
	// disconnected), next the one being started (first start or replacement),
	// engaging the one being engaged with subscribers right now: their first
	// reconciles may ask for it before the engagement completes.
	cur, next, engaging *instance
	// runs are the instances that started a run for this record that may
	// still run (an attempt in flight among them), and the instances no longer
	// current or engaging that reconciles still hold (keepWhileHeld): a fence
	// waits for all of them.
	runs []*instance

	gen uint64 // bumped by every decision that makes attempts in flight stale
	// attempting is the gen of the attempt (or reconnection) on its way,
	// zero when none is: a healthy probe of a disconnected cluster starts one
	// only when none is on its way, so that an engagement slower than the
	// probe interval is never superseded by the next healthy answer.
	attempting uint64
	retry      *time.Timer // the next attempt after a failure
	backoff    time.Duration

	// fence is held while this replica may run the cluster (sharding).
	fence          context.Context
	releaseFence   func()
	acquiring      bool          // an Acquire is in flight or scheduled
	acquireBackoff time.Duration // wait before the next Acquire after a failed one

	failures int // consecutive failed probes
	// nextProbe and probing are guarded by the engine's probe queue's lock
	// (taken after the engine's): the scheduler and a healthy probe's answer
	// change them under the engine's read lock.
	nextProbe time.Time // zero while no probe is scheduled
	probing   bool
	// healthGauge is the value last written to multicluster_cluster_healthy
	// for the record, plus one (0: none written since the series was
	// released): an answer that does not change it writes nothing. Written
	// under the record's lock, read or exclusive.
	healthGauge atomic.Int32
	// settled is latched once the record was engaged or declared
	// disconnected: readiness reads it without the record's lock.
	settled atomic.Bool
}

// recordMap is the engine's records by name. It is read under the engine's
// read lock, added to under the read lock (a record's creator holds the
// record's own lock until it is complete) or the exclusive lock, and removed
// from under the exclusive lock only: a provider publishing thousands of
// clusters does not take the exclusive lock for each, and the attempts already
// started never wait for the ones still being published.
type recordMap struct {
	m sync.Map // multicluster.ClusterName -> *record
	n atomic.Int64
}

func (rm *recordMap) get(name multicluster.ClusterName) (*record, bool) {
	v, ok := rm.m.Load(name)
	if !ok {
		return nil, false
	}
	return v.(*record), true
}

// is reports whether rec is name's record (not removed, nor replaced).
func (rm *recordMap) is(name multicluster.ClusterName, rec *record) bool {
	got, ok := rm.get(name)
	return ok && got == rec
}

// getOrAdd returns name's record, adding rec if there is none; loaded reports
// whether it was there already.
func (rm *recordMap) getOrAdd(name multicluster.ClusterName, rec *record) (_ *record, loaded bool) {
	v, loaded := rm.m.LoadOrStore(name, rec)
	if !loaded {
		rm.n.Add(1)
	}
	return v.(*record), loaded
}

func (rm *recordMap) remove(name multicluster.ClusterName) {
	if _, ok := rm.m.LoadAndDelete(name); ok {
		rm.n.Add(-1)
	}
}

func (rm *recordMap) len() int { return int(rm.n.Load()) }

// all yields every record, in no particular order.
func (rm *recordMap) all() iter.Seq[*record] {
	return func(yield func(*record) bool) {
		rm.m.Range(func(_, v any) bool { return yield(v.(*record)) })
	}
}

// lockRecord takes the engine's read lock and rec's own lock, for a change of
// rec's fields that touches no other record (see record); it returns the
// function that releases both. The functions named ...Locked that change only
// rec (transitionLocked, admitLocked, attemptLocked, notifyLocked) may run
// under it; the ones that change the fleet need the exclusive lock.
func (e *Engine) lockRecord(rec *record) (unlock func()) {
	e.mu.RLock()
	rec.mu.Lock()
	return func() {
		rec.mu.Unlock()
		e.mu.RUnlock()
	}
}

// owner is the provider's context an adopted member lives within.
type owner struct {
	ctx  context.Context
	stop func() bool
}

// waiter is an Engage call waiting for its member's engagement.
type waiter struct {
	m    *Member
	done chan error // buffered: the engine never blocks on a waiter
}

// instance is one cluster.Cluster of a record and the work tied to it.
type instance struct {
	cl     cluster.Cluster
	hash   string
	member *Member // the member it was started for
	// built is set when the engine built the cluster from Member.Build: it may
	// be stopped and built again. Otherwise the cluster is the provider's
	// (adopted through Engage, or Member.Cluster) and is only engaged and
	// disengaged.
	built bool
	// run is the instance's life in the engine: it ends on teardown, and with
	// the fence or the engine. It ends the cluster's Start if the engine runs
	// the cluster.
	run     context.Context
	stopRun context.CancelFunc
	// stopped is closed when the cluster's Start returned (nil if the engine
	// does not run it).
	stopped chan struct{}
	// appRuns is set, before stopped is closed, when Start answered that the
	// application runs the cluster already: its closed stopped then means
	// nothing about the cluster's life.
	appRuns *atomic.Bool
	// shared is set on an instance made by share: its run is the one an
	// earlier instance started, which stays on the record's books for it.
	shared bool
	// eng is the engagement with subscribers; nil while not engaged.
	eng       context.Context
	disengage context.CancelFunc
	// offered[i] is set once subscriber i was engaged with this instance;
	// guarded by the name's engagement lock (nameLocks).
	offered []bool
	// inflight counts the reconciles running against this instance (Hold).
	inflight inflight
	// probeReq is the request every health probe of the instance sends,
	// with its context; set by the first probe. One probe of a record runs
	// at a time (record.probing, under the probe queue's lock).
	probeReq *http.Request
}

// inflight counts work in flight and tells when none is left. Adding and
// finishing work is an atomic add on the count: many workers reconciling one
// cluster share no lock. The mutex is taken only when a drain waits for zero,
// and by the finish that brings the count to zero while one waits.
type inflight struct {
	n    atomic.Int64
	mu   sync.Mutex
	idle chan struct{} // made by wait while work is in flight; closed at zero
}

func (f *inflight) add() { f.n.Add(1) }

func (f *inflight) done() {
	if f.n.Add(-1) != 0 {
		return
	}
	f.mu.Lock()
	// Work added meanwhile keeps the waiter waiting: it is the last
	// finish, seeing zero under the lock, that closes idle.
	if f.idle != nil && f.n.Load() == 0 {
		close(f.idle)
		f.idle = nil
	}
	f.mu.Unlock()
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// wait returns a channel closed once nothing is in flight.
func (f *inflight) wait() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n.Load() == 0 {
		return closedChan
	}
	if f.idle == nil {
		f.idle = make(chan struct{})
	}
	return f.idle
}

// hold is one reconcile's claim on an instance (Engine.Hold); release is
// its done, safe to call twice.
type hold struct {
	in       *instance
	released atomic.Bool
}

func (h *hold) release() {
	if h.released.CompareAndSwap(false, true) {
		h.in.inflight.done()
	}
}

// offer marks subscriber idx as engaged with in; under the name's engagement
// lock.
func (in *instance) offer(idx int) {
	for len(in.offered) <= idx {
		in.offered = append(in.offered, false)
	}
	in.offered[idx] = true
}

// takeInstances detaches every instance of rec, current, next and any the
// engine still runs for an attempt in flight, for teardown.
func (rec *record) takeInstances() []*instance {
	var out []*instance
	for _, in := range append([]*instance{rec.cur, rec.next}, rec.runs...) {
		if in != nil && !slices.Contains(out, in) {
			out = append(out, in)
		}
	}
	rec.cur, rec.next, rec.engaging, rec.runs = nil, nil, nil, nil
	return out
}

// keepWhileHeld is called for every instance that stops being rec's current
// or engaging one without being taken away with the record's instances
// (takeInstances): reconciles handed it (Hold) may still run, so it stays on
// rec's books (runs) until they return, and a fence taken away later waits
// for them. Instances on the books that are finished leave them. Under rec's
// lock or the engine's exclusive one (Hold counts under rec's read lock, so
// the count read here cannot grow from zero afterwards: the instance is not
// handed out any more).
func (rec *record) keepWhileHeld(in *instance) {
	rec.runs = slices.DeleteFunc(rec.runs, (*instance).finished)
	if in.inflight.n.Load() > 0 && !slices.Contains(rec.runs, in) {
		rec.runs = append(rec.runs, in)
	}
}

// share returns a new instance of in's cluster and run, to engage again:
// its stopped signal carries over, so that its death is still noticed and a
// fence waits for it.
func (in *instance) share() *instance {
	return &instance{cl: in.cl, hash: in.hash, member: in.member, run: in.run, stopRun: in.stopRun, stopped: in.stopped, appRuns: in.appRuns, shared: true}
}

// finished reports whether in needs no waiting for any more: no reconcile
// holds it, and, unless it shares a run that another instance on the books
// stands for, its run ended and its cluster (if the engine runs it) stopped.
func (in *instance) finished() bool {
	if !in.shared && (in.run.Err() == nil || (in.stopped != nil && !in.dead())) {
		return false
	}
	select {
	case <-in.inflight.wait():
		return true
	default:
		return false
	}
}

// dead reports whether the engine ran the instance's cluster and its Start
// returned.
func (in *instance) dead() bool {
	if in.stopped == nil {
		return false
	}
	select {
	case <-in.stopped:
		return !in.appRuns.Load()
	default:
		return false
	}
}

// nameLocks serializes the engagements of each cluster name with
// subscribers: a new instance's engagement and a late subscriber's catch-up
// never interleave, so every subscriber ends up holding the current instance.
// It is kept by name, not by record: an engagement of a removed record may
// still be calling subscribers when the name is published again, and a
// subscriber that heard the old engagement after the new one (its context
// ended meanwhile) would let go of the cluster while the engine counts it
// engaged. A name's lock lives while someone holds or waits for it.
type nameLocks struct {
	mu sync.Mutex
	m  map[multicluster.ClusterName]*nameLock
}

type nameLock struct {
	sync.Mutex
	refs int // holders and waiters; under nameLocks.mu
}

// lock takes name's engagement lock and returns its release.
func (l *nameLocks) lock(name multicluster.ClusterName) (unlock func()) {
	l.mu.Lock()
	nl := l.m[name]
	if nl == nil {
		if l.m == nil {
			l.m = map[multicluster.ClusterName]*nameLock{}
		}
		nl = &nameLock{}
		l.m[name] = nl
	}
	nl.refs++
	l.mu.Unlock()
	nl.Lock()
	return func() {
		nl.Unlock()
		l.mu.Lock()
		if nl.refs--; nl.refs == 0 {
			delete(l.m, name)
		}
		l.mu.Unlock()
	}
}
