package fleet

import (
	"context"
	"iter"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// record is one cluster name's place in the fleet.
//
// Its fields are written under the engine's lock (Engine.mu) only, and every
// change a reader may see is published as a new view (publishLocked):
// readers (Get, Hold, State, Snapshot, the probe scheduler, readiness) load
// the view and take no lock at all. The work on a name that calls out
// (building, starting, engaging, draining, waiting for a fence) runs one
// step at a time, outside the lock, in the goroutine that holds the name's
// turn (busy; see Engine.kickLocked).
type record struct {
	name multicluster.ClusterName
	view atomic.Pointer[view]

	// member is what the provider wants: published with SetMember, or
	// adopted through Engage (adapted at the door, see door.go); nil once
	// removed.
	member *Member
	// conn is what the clusters of a member with a Config are built from,
	// across its publications (see connection.go); nil for other members.
	conn    *connection
	waiters []*waiter // Engage calls waiting for their member's engagement
	gone    bool      // forgotten: no longer in the engine's map

	paused bool               // its requests are held (Engine.SetPaused, Member.Paused)
	busy   bool               // a goroutine holds the name's turn
	cancel context.CancelFunc // ends the step in flight (an attempt or a fence's Acquire) once it serves nothing wanted

	state State
	// cur is the instance subscribers were engaged with (engaged or
	// disconnected); engaging the one being engaged right now, whose first
	// reconciles may ask for it before the engagement completes.
	cur, engaging *instance
	// runs are every instance that may still run, or that reconciles may
	// still hold (cur among them): before a fence is released, all of them
	// are stopped and drained.
	runs []*instance

	fence          *fence
	retry          *time.Timer // the next attempt (or Acquire) after a failure; nil when none waits
	backoff        time.Duration
	acquireBackoff time.Duration
	failures       atomic.Int32 // consecutive failed probes; written under the lock, read by the probes' fast path
	answering      bool         // disconnected, and answered healthily enough times in a row: reconnect
	successes      int          // healthy answers in a row while disconnected
	disconnects    []time.Time  // within the last FlapWindow: a flapping cluster needs more successes
	since          time.Time    // when it entered its state

	// nextProbe and probing are guarded by the engine's probe queue's lock.
	nextProbe time.Time // zero while no probe is scheduled
	probing   bool
	// healthGauge is the value last written to multicluster_cluster_healthy
	// for the record, plus one (0: none written since the series was
	// released): an answer that does not change it writes nothing.
	healthGauge atomic.Int32
	// probeCounters are the cluster's multicluster_cluster_probes_total
	// series, by probeResult; nil while it has none.
	probeCounters atomic.Pointer[[3]prometheus.Counter]
	// settled is latched once the record was engaged or declared
	// disconnected: readiness reads it.
	settled atomic.Bool
	// note is the last probe's answer and the last error, for listings
	// (status.go).
	note statusNote
}

// view is what readers see of a record: replaced as a whole, never changed.
type view struct {
	state State
	// in is the instance readers are handed (Get, Hold): the engaged one, or
	// the one being engaged; nil if none.
	in *instance
	// probe is the instance the probes ask (engaged or disconnected).
	probe *instance
	// paused: controllers hold its requests.
	paused bool
	// since is when the record entered state (listings show it).
	since time.Time
	// changed is closed when a view with another state, or another pause,
	// replaces this one.
	changed chan struct{}
}

// setPaused pauses or resumes rec, logging and counting the change; under
// the engine's lock.
func (rec *record) setPaused(paused bool, log logr.Logger) {
	if rec.paused == paused {
		return
	}
	rec.paused = paused
	if paused {
		log.Info("Cluster paused: its requests are held until it is resumed", "cluster", rec.name)
		metrics.Paused.WithLabelValues(rec.name).Set(1)
	} else {
		log.Info("Cluster resumed: its held requests are reconciled", "cluster", rec.name)
		metrics.Paused.DeleteLabelValues(rec.name)
	}
	publishLocked(rec)
}

// fence is this replica's claim on a cluster (sharding).
type fence struct {
	ctx     context.Context
	release func()
}

// waiter is an Engage call, or a publication with an Outcome, waiting for
// its member's engagement.
type waiter struct {
	m    *Member
	done chan<- error // answered once; the engine never blocks on it
}

// notifyLocked answers the Engage calls waiting for m (every one if m is nil).
func (rec *record) notifyLocked(m *Member, err error) {
	kept := rec.waiters[:0]
	for _, w := range rec.waiters {
		if m == nil || w.m == m {
			answer(w.done, err)
		} else {
			kept = append(kept, w)
		}
	}
	clear(rec.waiters[len(kept):])
	rec.waiters = kept
}

// track puts in on rec's books: every instance that runs is, so that a
// fence taken away later waits for it. Finished ones leave them, but for
// the current one (a disconnected cluster's, whose member a leave must end).
func (rec *record) track(in *instance) {
	rec.runs = append(slices.DeleteFunc(rec.runs, func(r *instance) bool {
		return r != rec.cur && r.finished()
	}), in)
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// recordMap is the engine's records by name: written under the engine's
// lock, read without one.
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

// getOrAdd returns name's record, adding one; under the engine's lock.
func (rm *recordMap) getOrAdd(name multicluster.ClusterName) *record {
	rec, ok := rm.get(name)
	if !ok {
		rec = &record{name: name}
		publishLocked(rec)
		rm.m.Store(name, rec)
		rm.n.Add(1)
	}
	return rec
}

// view returns what readers see of name; nil if the engine does not know it.
func (rm *recordMap) view(name multicluster.ClusterName) *view {
	rec, ok := rm.get(name)
	if !ok {
		return nil
	}
	if v := rec.view.Load(); v.state != StateGone && v.state != "" {
		return v
	}
	return nil
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

// instance is one run of a member's cluster and the work tied to it.
type instance struct {
	cl     cluster.Cluster // what subscribers and readers are handed
	member *Member         // the member it was built for
	// run is the instance's life: it ends on teardown, and with the fence or
	// the engine.
	run     context.Context
	stopRun context.CancelFunc
	stopped chan struct{} // closed when start returned
	exited  atomic.Bool   // start returned while the instance should have run
	// eng is the engagement with subscribers; nil while not engaged.
	eng       context.Context
	disengage context.CancelFunc
	offered   int // subscribers engaged with it so far (a prefix: subscribers are append-only)
	// inflight counts the reconciles running against this instance (Hold).
	inflight inflight
	// probeReq is the request every health probe of the instance sends, with
	// its context; set by the first probe. One probe of a record runs at a
	// time (record.probing).
	probeReq *http.Request
}

// teardown ends the instance's engagement and its run.
func (in *instance) teardown() {
	if in.disengage != nil {
		in.disengage()
	}
	in.stopRun()
}

// dead reports whether the instance's cluster stopped running.
func (in *instance) dead() bool { return isClosed(in.stopped) }

// finished reports whether in needs no waiting for any more: its run ended,
// its cluster stopped and no reconcile holds it.
func (in *instance) finished() bool {
	if in.run.Err() == nil || !in.dead() {
		return false
	}
	select {
	case <-in.inflight.wait():
		return true
	default:
		return false
	}
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
