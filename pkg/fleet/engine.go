package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"sync"
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

	// mu guards everything below and every record's fields. It is never held
	// while calling out: subscribers, Build, Report, Refresh and the network
	// are called without it.
	mu  sync.RWMutex    // read-locked by Get and State, which reconcilers call per request
	ctx context.Context // the engine's run; nil until Start
	// base is the parent of every cluster's run: it ends with the engine's
	// run, and exists before it for adopted clusters engaged before Start.
	base     context.Context
	stopBase context.CancelFunc
	records  map[multicluster.ClusterName]*record
	subs     []multicluster.Aware // append-only
	ready    bool                 // startup readiness, latched
	adopted  uint64               // adopted instances so far: their members' hashes
	closing  bool                 // Start waits for wg: no more goroutines on it
	wg       sync.WaitGroup       // attempts, probes and cluster runs

	healthSeries metrics.SeriesCap
}

// record is one cluster name's place in the fleet.
type record struct {
	name  multicluster.ClusterName
	state State

	// member is what the provider wants: published with SetMember, or adopted
	// through Engage (member.adopted), then owner is the provider's context the
	// member lives within. Every record has a member.
	member  *Member
	owner   *owner
	waiters []*waiter // Engage calls waiting for their member's first engagement

	// engMu serializes engagements of this record with subscribers: a new
	// instance's engagement and a late subscriber's catch-up never interleave,
	// so every subscriber ends up holding the record's current instance.
	engMu sync.Mutex

	// cur is the instance subscribers were engaged with (engaged or
	// disconnected), next the one being started (first start or replacement),
	// engaging the one being engaged with subscribers right now: their first
	// reconciles may ask for it before the engagement completes.
	cur, next, engaging *instance
	// runs are the clusters the engine started for this record that may still
	// run (an attempt in flight among them): a fence waits for all of them.
	runs []*instance

	gen     uint64      // bumped by every decision that makes attempts in flight stale
	retry   *time.Timer // the next attempt after a failure
	backoff time.Duration

	// fence is held while this replica may run the cluster (sharding).
	fence          context.Context
	releaseFence   func()
	acquiring      bool          // an Acquire is in flight or scheduled
	acquireBackoff time.Duration // wait before the next Acquire after a failed one

	failures  int // consecutive failed probes
	nextProbe time.Time
	probing   bool
	settled   bool // engaged or declared disconnected at least once: readiness
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
	// eng is the engagement with subscribers; nil while not engaged.
	eng       context.Context
	disengage context.CancelFunc
	// offered[i] is set once subscriber i was engaged with this instance;
	// guarded by the record's engMu.
	offered []bool
	// inflight counts the reconciles running against this instance (Hold).
	inflight inflight
}

// inflight counts work in flight and tells when none is left.
type inflight struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to zero; nil while n is zero
}

func (f *inflight) add() {
	f.mu.Lock()
	if f.n == 0 {
		f.idle = make(chan struct{})
	}
	f.n++
	f.mu.Unlock()
}

func (f *inflight) done() {
	f.mu.Lock()
	if f.n--; f.n == 0 {
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
	if f.n == 0 {
		return closedChan
	}
	return f.idle
}

// New returns an engine; run it with Start.
func New(opts Options) *Engine {
	opts = opts.withDefaults()
	e := &Engine{opts: opts, log: opts.Logger, records: map[multicluster.ClusterName]*record{}}
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
	if from != "" {
		metrics.Clusters.WithLabelValues(string(from)).Dec()
	}
	if to != StateGone {
		metrics.Clusters.WithLabelValues(string(to)).Inc()
	}
	metrics.Transitions.WithLabelValues(string(from), string(to)).Inc()
	if to == StateEngaged || to == StateDisconnected {
		rec.settled = true
	}
	e.log.Info("Cluster "+string(to), "cluster", rec.name, "from", string(from), "reason", why)
}

// Subscribe engages a with every engaged cluster now and every cluster
// engaged later. It returns once a has been offered the current ones,
// concurrently; their errors are logged and counted, not returned: the
// clusters stay engaged with everyone else. A cluster whose engagement is in
// flight is offered to a by that engagement, never twice.
func (e *Engine) Subscribe(a multicluster.Aware) {
	e.mu.Lock()
	idx := len(e.subs)
	e.subs = append(e.subs, a)
	recs := make([]*record, 0, len(e.records))
	for _, rec := range e.records {
		recs = append(recs, rec)
	}
	e.mu.Unlock()

	var wg sync.WaitGroup
	for _, rec := range recs {
		wg.Go(func() { e.catchUp(rec, idx, a) })
	}
	wg.Wait()
}

// catchUp engages subscriber idx with rec's current instance unless it holds
// it already. Serialized with rec's engagements by engMu: the one path that
// catches late subscribers up besides the engagement itself.
func (e *Engine) catchUp(rec *record, idx int, a multicluster.Aware) {
	rec.engMu.Lock()
	defer rec.engMu.Unlock()
	e.mu.RLock()
	in := rec.cur
	ok := e.records[rec.name] == rec && rec.state == StateEngaged && in != nil && in.eng != nil && in.eng.Err() == nil
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

// offer marks subscriber idx as engaged with in; under the record's engMu.
func (in *instance) offer(idx int) {
	for len(in.offered) <= idx {
		in.offered = append(in.offered, false)
	}
	in.offered[idx] = true
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
		return fmt.Errorf("cluster %q: engagement context already done: %w", name, err)
	}
	e.mu.Lock()
	rec := e.recordLocked(name)
	if rec.member != nil && !rec.member.adopted {
		e.mu.Unlock()
		return fmt.Errorf("cluster %q: already a member published by a provider; a name has one source", name)
	}
	m := rec.member
	if m == nil || m.Cluster != cl {
		e.adopted++
		m = &Member{Name: name, Hash: fmt.Sprintf("adopted-%d", e.adopted), Cluster: cl, adopted: true}
		e.notifyLocked(rec, rec.member, fmt.Errorf("cluster %q: replaced by another instance", name))
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
		if rec.member == m && e.records[name] == rec {
			stop, release = e.removeLocked(rec, "engagement refused")
		}
		e.mu.Unlock()
		e.teardownAndRelease(name, stop, "engagement refused", release)
		return err
	case <-ctx.Done():
		return fmt.Errorf("cluster %q: engagement context ended while engaging: %w", name, ctx.Err())
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
	if rec.owner != o || rec.member != m || e.records[rec.name] != rec {
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

// recordLocked returns name's record, creating it.
func (e *Engine) recordLocked(name multicluster.ClusterName) *record {
	rec, ok := e.records[name]
	if !ok {
		rec = &record{name: name}
		e.records[name] = rec
	}
	return rec
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
	e.notifyLocked(rec, nil, fmt.Errorf("cluster %q: removed while engaging (%s)", rec.name, why))
	e.forgetLocked(rec, why)
	return stop, release
}

// forgetLocked removes rec from the fleet.
func (e *Engine) forgetLocked(rec *record, why string) {
	if e.records[rec.name] != rec {
		return
	}
	delete(e.records, rec.name)
	rec.gen++
	if rec.retry != nil {
		rec.retry.Stop()
	}
	e.transitionLocked(rec, StateGone, why)
	e.releaseSeriesLocked(rec.name)
}

// releaseSeriesLocked drops the cluster's per-cluster series: it is gone, or
// run by another replica now.
func (e *Engine) releaseSeriesLocked(name multicluster.ClusterName) {
	if e.healthSeries.Release(name) {
		metrics.Healthy.DeleteLabelValues(name)
	}
	if e.opts.OnRelease != nil {
		e.opts.OnRelease(name)
	}
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

// errSuperseded is returned by engage when a newer decision made the
// engagement stale.
func errSuperseded(name multicluster.ClusterName) error {
	return fmt.Errorf("cluster %q: replaced or removed while engaging", name)
}

// engage engages in with every subscriber, all or nothing, and makes it the
// record's current instance; the instance it replaces is torn down. Every
// instance, built or adopted, is engaged here.
func (e *Engine) engage(rec *record, gen uint64, in *instance) error {
	rec.engMu.Lock()
	defer rec.engMu.Unlock()
	e.mu.Lock()
	if rec.gen != gen || e.records[rec.name] != rec || in.run.Err() != nil {
		e.mu.Unlock()
		return errSuperseded(rec.name)
	}
	if rec.cur == nil && rec.state != StateDisconnected {
		e.transitionLocked(rec, StateStarting, "engaging")
	}
	in.eng, in.disengage = context.WithCancel(in.run)
	rec.engaging = in
	subs := e.subs[:len(e.subs):len(e.subs)]
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		if rec.engaging == in {
			rec.engaging = nil
		}
		e.mu.Unlock()
	}()

	err := engageAll(in.eng, rec.name, in.cl, subs)
	for err == nil {
		for i := range subs {
			in.offer(i)
		}
		e.mu.Lock()
		if rec.gen != gen || e.records[rec.name] != rec || in.run.Err() != nil {
			e.mu.Unlock()
			in.disengage()
			return errSuperseded(rec.name)
		}
		if in.dead() {
			// Its Start returned while it was engaged: it is not made current.
			e.mu.Unlock()
			err = fmt.Errorf("cluster %q: stopped running while it was engaged", rec.name)
			break
		}
		if len(e.subs) > len(subs) {
			// Subscribed meanwhile: they did not see this instance.
			more := e.subs[len(subs):len(e.subs):len(e.subs)]
			subs = e.subs[:len(e.subs):len(e.subs)]
			e.mu.Unlock()
			err = engageAll(in.eng, rec.name, in.cl, more)
			continue
		}
		old := rec.cur
		rec.cur, rec.failures, rec.backoff = in, 0, 0
		if rec.next == in {
			rec.next = nil
		}
		rec.nextProbe = time.Now().Add(e.opts.Health.Interval)
		e.transitionLocked(rec, StateEngaged, "engaged with every controller and runnable")
		e.notifyLocked(rec, in.member, nil)
		member := rec.member
		e.mu.Unlock()
		metrics.Engagements.WithLabelValues("success").Inc()
		if old != nil && old != in {
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
	e.mu.Lock()
	old := rec.cur
	e.mu.Unlock()
	if old != nil && old != in && old.eng != nil && old.eng.Err() == nil {
		if ferr := engageAll(old.eng, rec.name, old.cl, subs); ferr != nil {
			e.log.Error(ferr, "Failed to engage the previous cluster again after its replacement was refused", "cluster", rec.name)
		}
	}
	return fmt.Errorf("cluster %q: %w", rec.name, err)
}

// finished reports whether nothing of in runs any more: its run ended, its
// cluster (if the engine runs it) stopped, and no reconcile holds it.
func (in *instance) finished() bool {
	if in.run.Err() == nil || (in.stopped != nil && !in.dead()) {
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
		return true
	default:
		return false
	}
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
// released before done is called (bounded by Options.DrainTimeout). It returns
// the engagement's context, which ends when the cluster is disengaged; ok is
// false if name is not engaged (or being engaged) on this replica.
func (e *Engine) Hold(name multicluster.ClusterName) (engaged context.Context, done func(), ok bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	rec, ok := e.records[name]
	if !ok {
		return nil, nil, false
	}
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
	return in.eng, sync.OnceFunc(in.inflight.done), true
}

// Get returns the engaged cluster of name. A disconnected cluster yields an
// error matching both multicluster.ErrClusterNotConnected and
// multicluster.ErrClusterNotFound; any other name ErrClusterNotFound.
func (e *Engine) Get(name multicluster.ClusterName) (cluster.Cluster, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	rec, ok := e.records[name]
	switch {
	case !ok:
		return nil, fmt.Errorf("cluster %q: %w", name, multicluster.ErrClusterNotFound)
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
	rec, ok := e.records[name]
	if !ok {
		return StateGone, false
	}
	return rec.state, true
}

// Joining reports whether name is on its way to being engaged on this
// replica: published and admitted, starting, or wanted while this replica
// owns it (or runs everything).
func (e *Engine) Joining(name multicluster.ClusterName) bool {
	e.mu.RLock()
	rec, ok := e.records[name]
	var state State
	if ok {
		state = rec.state
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
	out := make([]Status, 0, len(e.records))
	for _, rec := range e.records {
		out = append(out, Status{Name: rec.name, State: rec.state})
	}
	e.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Ready is a healthz.Checker for startup readiness: it passes once every
// cluster known that this replica owns is engaged or has been declared
// disconnected (a cluster waiting for its fence counts), and stays
// passing from then on. A dead member never holds it back beyond its first
// failed attempt.
func (e *Engine) Ready(_ *http.Request) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ready {
		return nil
	}
	if e.ctx == nil {
		return errors.New("the fleet engine has not started")
	}
	var waiting []string
	for _, rec := range e.records {
		// A cluster this replica owns counts while it waits for its fence: in
		// a rolling update, the new pod is not ready while the old one still
		// holds its clusters.
		if !rec.settled && (rec.state != StateWanted || e.runsLocked(rec)) {
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
	e.ready = true
	return nil
}
