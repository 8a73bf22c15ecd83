package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// ErrNotOwned is returned, wrapped, by Engage for a cluster that sharding
// assigns to another replica: this replica must not run it.
var ErrNotOwned = errors.New("cluster owned by another replica")

// Engine owns the lifecycle of every cluster of the fleet: one record per
// cluster name, one lock. See the package documentation.
type Engine struct {
	opts Options
	log  logr.Logger

	// mu guards everything below and every record's fields. It is never held
	// while calling out: subscribers, Build, Report, Refresh and the network
	// are called without it.
	mu      sync.RWMutex    // read-locked by Get and State, which reconcilers call per request
	ctx     context.Context // the engine's run; nil until Start
	records map[multicluster.ClusterName]*record
	subs    []multicluster.Aware // append-only
	ready   atomic.Bool          // startup readiness, latched; read without the lock
	wg      sync.WaitGroup       // attempts, probes and cluster runs

	healthSeries metrics.SeriesCap
}

// record is one cluster name's place in the fleet.
type record struct {
	name  multicluster.ClusterName
	state State

	member *Member // what the provider wants; nil for an adopted cluster

	// cur is the instance subscribers were engaged with (engaged or
	// disconnected), next the one being started (first start or replacement),
	// engaging the one being engaged with subscribers right now: their first
	// reconciles may ask for it before the engagement completes.
	cur, next, engaging *instance

	gen     uint64      // bumped by every decision that makes attempts in flight stale
	retry   *time.Timer // the next attempt after a failure
	backoff time.Duration

	// fence is held while this replica may run the cluster (sharding).
	fence        context.Context
	releaseFence func()
	acquiring    bool

	failures  int // consecutive failed probes
	nextProbe time.Time
	probing   bool
	settled   bool // engaged or declared disconnected at least once: readiness
}

// instance is one cluster.Cluster of a record and the work tied to it.
type instance struct {
	cl   cluster.Cluster
	hash string
	// built is set when the engine built the cluster from Member.Build: it may
	// be stopped and built again. Otherwise the cluster is the provider's
	// (adopted through Engage, or Member.Cluster) and is only engaged and
	// disengaged.
	built bool
	// run ends the cluster's Start (built and Member.Cluster instances); nil
	// for adopted clusters, which their provider runs.
	run     context.Context
	stopRun context.CancelFunc
	// owner is the context the engagement lives within: the provider's for an
	// adopted cluster, run for the others.
	owner     context.Context
	stopOwner func() bool // unregisters the AfterFunc on an adopted cluster's owner
	// stopped is closed when the cluster's Start returned (nil if the engine
	// does not run it).
	stopped chan struct{}
	// eng is the engagement with subscribers; nil while not engaged.
	eng       context.Context
	disengage context.CancelFunc
}

// New returns an engine; run it with Start.
func New(opts Options) *Engine {
	opts = opts.withDefaults()
	e := &Engine{opts: opts, log: opts.Logger, records: map[multicluster.ClusterName]*record{}}
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
// clusters stay engaged with everyone else.
func (e *Engine) Subscribe(a multicluster.Aware) {
	e.mu.Lock()
	e.subs = append(e.subs, a)
	type target struct {
		name multicluster.ClusterName
		in   *instance
	}
	var targets []target
	for _, rec := range e.records {
		if rec.state == StateEngaged && rec.cur != nil && rec.cur.eng != nil {
			targets = append(targets, target{rec.name, rec.cur})
		}
	}
	e.mu.Unlock()

	var wg sync.WaitGroup
	for _, t := range targets {
		wg.Go(func() {
			if err := a.Engage(t.in.eng, t.name, t.in.cl); err != nil && t.in.eng.Err() == nil {
				metrics.Engagements.WithLabelValues("failure").Inc()
				e.log.Error(err, "Failed to engage a cluster with a runnable added late", "cluster", t.name)
			}
		})
	}
	wg.Wait()
}

// Engage adopts a cluster that its provider started and synced, and engages
// it with every subscriber: the way in of providers written as the seeds
// describe. ctx is the provider's: when it ends, the cluster is gone. The
// engagement is all or nothing: if a subscriber refuses, every subscriber
// lets go of the cluster and the error is returned.
//
// Engaging the same instance again under a new ctx keeps the engagement and
// ties it to the new ctx; a different instance replaces the engaged one.
func (e *Engine) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cluster %q: engagement context already done: %w", name, err)
	}
	if adm := e.opts.Admission; adm != nil && !adm.Owns(name) {
		return fmt.Errorf("cluster %q: %w", name, ErrNotOwned)
	}
	e.mu.Lock()
	rec := e.recordLocked(name)
	if rec.member != nil {
		e.mu.Unlock()
		return fmt.Errorf("cluster %q: already a member published by a provider; a name has one source", name)
	}
	if cur := rec.cur; cur != nil && cur.cl == cl && cur.eng != nil && cur.eng.Err() == nil {
		// The same instance under a new owner: move the engagement's lifetime
		// over, so that cancelling the old ctx does not end it.
		e.ownLocked(rec, cur, ctx)
		e.mu.Unlock()
		return nil
	}
	rec.gen++
	gen := rec.gen
	in := &instance{cl: cl}
	e.ownLocked(rec, in, ctx)
	e.mu.Unlock()
	return e.engage(rec, gen, in)
}

// ownLocked ties an adopted instance to its provider's ctx: when ctx ends,
// the instance leaves (and with it the record, unless replaced).
func (e *Engine) ownLocked(rec *record, in *instance, ctx context.Context) {
	if in.stopOwner != nil {
		in.stopOwner()
	}
	in.owner = ctx
	in.stopOwner = context.AfterFunc(ctx, func() { e.ownerDone(rec, in) })
}

func (e *Engine) ownerDone(rec *record, in *instance) {
	e.mu.Lock()
	if in.owner.Err() == nil { // re-owned meanwhile
		e.mu.Unlock()
		return
	}
	var stop []*instance
	switch {
	case rec.cur == in:
		stop = append(stop, in)
		rec.cur = nil
		if rec.next == nil {
			e.forgetLocked(rec, "provider-stopped")
		}
	case rec.next == in:
		rec.next = nil
		rec.gen++
		stop = append(stop, in)
	}
	e.mu.Unlock()
	for _, in := range stop {
		e.teardown(rec.name, in, "provider-stopped")
	}
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
	if e.healthSeries.Release(rec.name) {
		metrics.Healthy.DeleteLabelValues(rec.name)
	}
}

// engage engages in with every subscriber, all or nothing, and makes it the
// record's current instance; the instance it replaces is torn down. It is
// called for adopted and built instances alike.
func (e *Engine) engage(rec *record, gen uint64, in *instance) error {
	e.mu.Lock()
	if rec.gen != gen || e.records[rec.name] != rec {
		e.mu.Unlock()
		return fmt.Errorf("cluster %q: replaced or removed while engaging", rec.name)
	}
	if rec.cur == nil && rec.state != StateDisconnected {
		e.transitionLocked(rec, StateStarting, "engaging")
	}
	parent := in.owner
	if in.run == nil {
		// Adopted: the provider's ctx may be replaced by a later Engage of the
		// same instance (see ownLocked); the engagement ends when the current
		// owner's does, through ownerDone, not with the first owner.
		parent = context.WithoutCancel(in.owner)
	}
	in.eng, in.disengage = context.WithCancel(parent)
	rec.engaging = in
	subs := slices.Clone(e.subs)
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
		e.mu.Lock()
		if rec.gen != gen || e.records[rec.name] != rec || in.owner.Err() != nil {
			if rec.cur == nil && rec.next == nil && rec.member == nil {
				e.forgetLocked(rec, "provider-stopped")
			}
			e.mu.Unlock()
			in.disengage()
			return fmt.Errorf("cluster %q: replaced or removed while engaging", rec.name)
		}
		if len(e.subs) > len(subs) {
			// Subscribed meanwhile: they did not see this instance.
			more := slices.Clone(e.subs[len(subs):])
			subs = append(subs, more...)
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
	if rec.cur == nil && rec.next == nil && rec.member == nil && e.records[rec.name] == rec {
		e.forgetLocked(rec, "engagement refused")
	}
	e.mu.Unlock()
	if old != nil && old != in && old.eng != nil && old.eng.Err() == nil {
		if ferr := engageAll(old.eng, rec.name, old.cl, subs); ferr != nil {
			e.log.Error(ferr, "Failed to engage the previous cluster again after its replacement was refused", "cluster", rec.name)
		}
	}
	return fmt.Errorf("cluster %q: %w", rec.name, err)
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

// teardown ends an instance's engagement and, if the engine runs it, the
// cluster itself.
func (e *Engine) teardown(name multicluster.ClusterName, in *instance, why string) {
	if in.disengage != nil && in.eng.Err() == nil {
		metrics.Disengagements.WithLabelValues(why).Inc()
	}
	if in.disengage != nil {
		in.disengage()
	}
	if in.stopOwner != nil {
		in.stopOwner()
	}
	if in.stopRun != nil {
		// The engine runs this cluster (for a cluster the application started
		// itself, only the engagement's context ends).
		in.stopRun()
	}
	_ = name
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
// cluster known is engaged or has been declared disconnected, and stays
// passing from then on. A dead member never holds it back beyond its first
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
	var waiting []string
	for _, rec := range e.records {
		if !rec.settled && rec.state != StateWanted {
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
