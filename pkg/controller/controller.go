package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/mcruntime/multicluster-runtime/internal/engagements"
	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/internal/redact"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"
)

// Options are controller-runtime's controller options for multi-cluster
// requests. CacheSyncTimeout (default 2 minutes) also bounds how long engaging
// one cluster may take: a cluster whose watches cannot be set up within it
// fails to engage, without delaying the others.
type Options = TypedOptions[mcreconcile.Request]

// TypedOptions are Options for a controller with its own request type.
type TypedOptions[request comparable] = controller.TypedOptions[request]

// Controller is a controller-runtime controller that is also multicluster.Aware.
type Controller = TypedController[mcreconcile.Request]

// TypedController is a Controller with its own request type.
type TypedController[request comparable] interface {
	controller.TypedController[request]
	multicluster.Aware

	// MultiClusterWatch starts src in every cluster engaged now and later.
	MultiClusterWatch(src mcsource.TypedSource[client.Object, request]) error
}

// New returns a controller added to mgr: it starts with the manager and is
// engaged with every cluster the manager engages.
func New(name string, mgr mcmanager.Manager, options Options) (Controller, error) {
	return NewTyped(name, mgr, options)
}

// NewUnmanaged returns a controller that the caller starts and engages.
// mgr supplies the host cluster, offered to sources under the name "".
func NewUnmanaged(name string, mgr mcmanager.Manager, options Options) (Controller, error) {
	return NewTypedUnmanaged(name, mgr, options)
}

// NewTyped is New for a controller with its own request type: the request
// carries its cluster (see mcreconcile.ClusterAware).
func NewTyped[request mcreconcile.ClusterAware[request]](name string, mgr mcmanager.Manager, options TypedOptions[request]) (TypedController[request], error) {
	options.DefaultFromConfig(mgr.GetControllerOptions())
	c, err := NewTypedUnmanaged(name, mgr, options)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(c); err != nil {
		return nil, fmt.Errorf("controller %q: adding to manager: %w", name, err)
	}
	return c, nil
}

// NewTypedUnmanaged is NewUnmanaged for a controller with its own request type.
func NewTypedUnmanaged[request mcreconcile.ClusterAware[request]](name string, mgr mcmanager.Manager, options TypedOptions[request]) (TypedController[request], error) {
	if options.Reconciler == nil {
		return nil, fmt.Errorf("controller %q: must specify Reconciler", name)
	}
	c := &mcController[request]{
		name:    name,
		host:    mgr.GetLocalManager(),
		timeout: options.CacheSyncTimeout,
		waiting: map[request]time.Time{},
		parked:  map[multicluster.ClusterName]*parking[request]{},
		paused:  map[multicluster.ClusterName]map[request]struct{}{},
		log:     mgr.GetLogger().WithValues("controller", name),
	}
	c.syncSeries.Max = metrics.MaxWatchSyncSeries
	if owner, ok := mgr.(mcmanager.FleetOwner); ok {
		c.fleet = owner.Fleet()
	}
	if rec, ok := mgr.(mcmanager.ReconcileRecorder); ok {
		c.recorder = rec
	}
	if ho, ok := mgr.(mcmanager.HostOwner); ok {
		c.hostOwner = ho
	}
	if c.timeout <= 0 {
		c.timeout = fleet.DefaultCacheSyncTimeout // the engine's: one default for a cluster's start
	}
	defaultQueue(&options)
	user := options.Reconciler
	options.Reconciler = reconcile.TypedFunc[request](func(ctx context.Context, req request) (reconcile.Result, error) {
		engaged := c.engagement(req.Cluster())
		// An engagement that ended is forgotten a moment later (its
		// context's AfterFunc): requests queued for it are not engaged either.
		if engaged == nil || engaged.Err() != nil {
			if req.Cluster() == "" {
				return c.hostNotOwned(req), nil
			}
			return c.notEngaged(req), nil
		}
		if c.fleet != nil && req.Cluster() != "" {
			if snap, _ := c.fleet.Snapshot(req.Cluster()); snap.Paused {
				c.holdPaused(req, snap.Changed)
				return reconcile.Result{}, nil
			}
		}
		// The engine holds the cluster's fence until this reconcile returned.
		held, ok := c.hold(engaged, req.Cluster())
		if !ok {
			if req.Cluster() == "" {
				return c.hostNotOwned(req), nil
			}
			return c.notEngaged(req), nil
		}
		c.stopWaiting(req)
		ctx, ec := withEngagement(ctx, engaged)
		res, err := user.Reconcile(ctx, req)
		ec.release()
		held()
		if engaged.Err() != nil && !c.stopping() {
			return c.disengagedDuring(req, err), nil
		}
		if c.recorder != nil {
			c.recorder.RecordReconcile(c.name, req.Cluster(), res, err)
		}
		return res, err
	})
	inner, err := controller.NewTypedUnmanaged(name, options)
	if err != nil {
		return nil, err
	}
	c.TypedController = inner
	if err := inner.Watch(&queueSource[request]{c: c}); err != nil {
		return nil, err
	}
	return c, nil
}

type mcController[request mcreconcile.ClusterAware[request]] struct {
	controller.TypedController[request]

	name     string
	host     cluster.Cluster
	timeout  time.Duration
	fleet    *fleet.Engine // the manager's, for the state of clusters this controller does not have
	recorder mcmanager.ReconcileRecorder
	log      logr.Logger
	// hostOwner says when this replica runs the host's work; hostOwnerOnly
	// (ServeHostOnHostOwner) engages the host only then. See hostowner.go.
	hostOwner     mcmanager.HostOwner
	hostOwnerOnly bool

	syncSeries metrics.SeriesCap // clusters with series in WatchSyncFailures

	mu      sync.RWMutex // serializes writers of clusters with sources and queue
	sources []mcsource.TypedSource[client.Object, request]
	// clusters holds this controller's engagement with each cluster (name →
	// *engagement): its sources live within the engagement's context. It is
	// the controller's only record of what it is engaged with; whether the
	// fleet runs a cluster is asked of the engine. Written under mu, read
	// without it by every reconcile, so that workers do not queue behind the
	// writers of thousands of clusters engaging at start-up.
	clusters sync.Map
	queue    workqueue.TypedRateLimitingInterface[request] // set when the controller starts
	ctx      context.Context                               // the controller's, set with queue

	waitMu   sync.Mutex
	waiting  map[request]time.Time                             // requests for joining clusters, since when
	parked   map[multicluster.ClusterName]*parking[request]    // those waiting now, by cluster
	paused   map[multicluster.ClusterName]map[request]struct{} // clusters paused now, and their requests if the queue cannot hold them (see holdPaused)
	nWaiting atomic.Int32                                      // len(waiting), read without the lock on every reconcile
	// joinChecks counts the looks at requests for joining clusters: one when
	// such a request first comes, and one per wake-up (the cluster changed
	// state, or engaged with this controller). Tests count it.
	joinChecks atomic.Int64
}

// engagement is one cluster's membership in this controller.
type engagement struct {
	cl     cluster.Cluster
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	started []startedSource // the sources started in the cluster, for StartedIn
}

// startedSource is a source started in a cluster, within one attempt.
type startedSource struct {
	src     any
	attempt context.Context
}

// record notes src as started in the cluster within attempt; sources of
// attempts that ended are forgotten.
func (e *engagement) record(src any, attempt context.Context) {
	e.mu.Lock()
	e.started = append(slices.DeleteFunc(e.started, func(s startedSource) bool { return s.attempt.Err() != nil }), startedSource{src: src, attempt: attempt})
	e.mu.Unlock()
}

var _ engagements.Record = &mcController[mcreconcile.Request]{}

// StartedIn returns the sources this controller started in the cluster
// engaged under name. It is how sources that route events by cluster name
// (mcsource.Channel) know the clusters this controller is engaged with.
func (c *mcController[request]) StartedIn(name multicluster.ClusterName) []any {
	e := c.lookup(name)
	if e == nil || e.ctx.Err() != nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]any, 0, len(e.started))
	for _, s := range e.started {
		if s.attempt.Err() == nil {
			out = append(out, s.src)
		}
	}
	return out
}

var _ Controller = &mcController[mcreconcile.Request]{}

// NeedLeaderElection reports whether the wrapped controller waits for leadership.
func (c *mcController[request]) NeedLeaderElection() bool {
	if le, ok := c.TypedController.(manager.LeaderElectionRunnable); ok {
		return le.NeedLeaderElection()
	}
	return true
}

// Engage starts every source of the controller in the cluster and returns
// once their watches have synced, bounded by CacheSyncTimeout; a watch whose
// list keeps failing fails it within seconds, with an error naming the
// controller and the watch (its type) below one naming the cluster, a
// *multicluster.ClusterError: the cluster is named once, by this method, for
// a caller that engages the controller itself. The fleet engine and
// pkg/clusters, which name the cluster themselves, take that naming off
// (multicluster.WithCluster), so that it is still named once. Before the
// controller has started, the cluster is remembered and its sources start
// with the controller (in the background, retried with backoff).
func (c *mcController[request]) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	if name == "" {
		return errors.New(`the cluster name "" is reserved for the host cluster`)
	}
	e, srcs, err := c.engage(ctx, name, cl)
	if err != nil || e == nil || srcs == nil {
		return multicluster.WithCluster(name, err)
	}
	// Engaged means synced: Engage returns once every watch delivered its
	// initial list, so that whoever engages the cluster announces it only
	// then. A list that keeps failing fails the engagement within seconds.
	// The errors below name the controller and the watch; the cluster is
	// named once, here.
	if err := c.startSources(e, name, srcs, true); err != nil {
		// Refused: whoever engages the cluster hears of it and decides.
		c.forget(name, e)
		e.cancel()
		return multicluster.WithCluster(name, err)
	}
	return nil
}

// engage records the engagement and replaces a previous one under the same
// name. It returns a nil engagement when cl is already engaged under name,
// and the sources to start in the cluster, nil before the controller runs.
// Both are decided under one lock, so that a concurrent MultiClusterWatch
// starts its source in this cluster or leaves it to us, never both.
func (c *mcController[request]) engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) (*engagement, []mcsource.TypedSource[client.Object, request], error) {
	if err := ctx.Err(); err != nil {
		// A done engagement would replace a live one and end it at once.
		return nil, nil, fmt.Errorf("controller %q: engagement context already done: %w", c.name, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.lookup(name)
	if old != nil && old.cl == cl && old.ctx.Err() == nil {
		return nil, nil, nil
	}
	if c.ctx != nil && c.ctx.Err() != nil {
		return nil, nil, fmt.Errorf("controller %q: controller has stopped", c.name)
	}
	ectx, cancel := context.WithCancel(ctx)
	e := &engagement{cl: cl, ctx: ectx, cancel: cancel}
	if old != nil {
		old.cancel()
	}
	c.clusters.Store(name, e)
	context.AfterFunc(ectx, func() { c.forget(name, e) })
	c.wake(name) // requests waiting for the cluster
	if c.queue == nil {
		return e, nil, nil
	}
	return e, append([]mcsource.TypedSource[client.Object, request]{}, c.sources...), nil
}

// lookup returns this controller's engagement with name, nil if none.
func (c *mcController[request]) lookup(name multicluster.ClusterName) *engagement {
	if e, ok := c.clusters.Load(name); ok {
		return e.(*engagement)
	}
	return nil
}

// engaged returns every engagement of this controller; under mu.
func (c *mcController[request]) engagedLocked() map[multicluster.ClusterName]*engagement {
	out := map[multicluster.ClusterName]*engagement{}
	c.clusters.Range(func(name, e any) bool {
		out[name.(multicluster.ClusterName)] = e.(*engagement)
		return true
	})
	return out
}

// engagement returns the context of this controller's engagement with the
// cluster, nil when it is not engaged. The host cluster is engaged as long as
// the controller runs, whose end ends its reconciles anyway: its engagement
// is one that never ends.
func (c *mcController[request]) engagement(name multicluster.ClusterName) context.Context {
	if name == "" {
		return c.hostEngagement()
	}
	if e := c.lookup(name); e != nil {
		return e.ctx
	}
	return nil
}

// MultiClusterWatch adds src and, once the controller runs, starts it in every
// engaged cluster.
func (c *mcController[request]) MultiClusterWatch(src mcsource.TypedSource[client.Object, request]) error {
	c.mu.Lock()
	c.sources = append(c.sources, src)
	var engaged map[multicluster.ClusterName]*engagement
	if c.queue != nil {
		engaged = c.engagedLocked()
	}
	c.mu.Unlock()

	// Concurrently: an unreachable cluster costs its timeout once, not per cluster.
	errs := make(chan error, len(engaged))
	for name, e := range engaged {
		go func() {
			// Its caller does not know the clusters: each error names its own.
			errs <- multicluster.WithCluster(name, c.startSources(e, name, []mcsource.TypedSource[client.Object, request]{src}, false))
		}()
	}
	var all []error
	for range engaged {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// startSources starts srcs in one cluster, bounded by the controller's
// CacheSyncTimeout. With wait, it also waits for their watches to sync, and a
// watch that does not fails the start; without, the sync is watched in the
// background (see watchSync). On failure, whatever this attempt registered is
// removed again; the engagement itself stays, for the caller to end or retry.
// Its errors name the controller and the watch; the caller names the cluster.
func (c *mcController[request]) startSources(e *engagement, name multicluster.ClusterName, srcs []mcsource.TypedSource[client.Object, request], wait bool) error {
	c.mu.RLock()
	q := c.queue
	c.mu.RUnlock()

	// The sources live as long as the engagement, unless this attempt fails.
	attempt, abandon := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	var syncing []syncingWatch[request]
	go func() {
		var errs []error
		startCtx := engagements.With(attempt, c)
		for _, s := range srcs {
			src, ok, err := s.ForCluster(name, e.cl)
			if err == nil && ok && src != nil {
				// Recorded first: it may route its first event at once.
				e.record(src, attempt)
				err = src.Start(startCtx, q)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("starting %v: %w", s, err))
			} else if ss, syncs := src.(source.TypedSyncingSource[request]); ok && syncs {
				syncing = append(syncing, syncingWatch[request]{ss, s})
			}
		}
		done <- errors.Join(errs...)
	}()

	deadline := time.Now().Add(c.timeout)
	timer := time.NewTimer(c.timeout)
	defer timer.Stop()
	var err error
	select {
	case err = <-done:
	case <-timer.C:
		err = fmt.Errorf("watches not set up within %s", c.timeout)
	case <-e.ctx.Done():
		abandon()
		return nil // disengaged meanwhile
	}
	if err != nil {
		abandon()
		metrics.WatchFailures.WithLabelValues(c.name).Inc()
		return fmt.Errorf("controller %q: %w", c.name, err)
	}
	if len(syncing) == 0 {
		_ = abandon // the attempt's context now ends with the engagement's
		return nil
	}
	if !wait {
		go c.watchSync(e, name, srcs, syncing, attempt, abandon)
		return nil
	}
	if err := c.waitForSync(name, syncing, attempt, deadline); err != nil {
		abandon()
		if e.ctx.Err() != nil {
			return nil // disengaged meanwhile
		}
		return fmt.Errorf("controller %q: %w", c.name, err)
	}
	_ = abandon // synced: the attempt's context now ends with the engagement's
	return nil
}

// waitForSync waits for the watches just started in a cluster to sync, until
// deadline (the start's CacheSyncTimeout). A watch that does not is
// counted by type.
func (c *mcController[request]) waitForSync(name multicluster.ClusterName, syncing []syncingWatch[request], attempt context.Context, deadline time.Time) error {
	ctx, cancel := context.WithDeadline(attempt, deadline)
	defer cancel()
	for _, s := range syncing {
		err := s.WaitForSync(ctx)
		if err == nil {
			continue
		}
		if attempt.Err() != nil {
			return err
		}
		c.countSyncFailure(name, s.TypedSyncingSource, err)
		if ctx.Err() != nil {
			err = fmt.Errorf("%v did not sync within %s: %w", s.of, c.timeout, err)
		}
		return err
	}
	return nil
}

// syncingWatch is a watch started in one cluster, with the controller's
// source it was made from. Errors describe the watch by that source: the
// watch's own String names the cluster, which whoever reports the error
// names already.
type syncingWatch[request comparable] struct {
	source.TypedSyncingSource[request]
	of mcsource.TypedSource[client.Object, request]
}

// countSyncFailure counts a watch that did not sync, by controller, cluster
// (capped, see metrics.MaxWatchSyncSeries) and type.
func (c *mcController[request]) countSyncFailure(name multicluster.ClusterName, s any, err error) {
	metrics.WatchFailures.WithLabelValues(c.name).Inc()
	typ := fmt.Sprintf("%T", s) // a source of another kind: its own type, bounded

	var se *mcsource.SyncError
	if errors.As(err, &se) {
		typ = se.Type
	}
	cl := clusterLabel(name)
	if !c.syncSeries.Admit(cl) {
		cl = metrics.OtherClusters
	}
	metrics.WatchSyncFailures.WithLabelValues(c.name, cl, typ).Inc()
}

// watchSync waits, bounded by CacheSyncTimeout, for the watches just started
// in a cluster to deliver their initial lists. A watch that cannot sync (the
// list is forbidden, the CRD is absent) would otherwise stall in silence: its
// failure is logged naming the cluster and the type, counted, and the
// cluster's watches of this controller are set up again with backoff. Other
// clusters, and other controllers in this cluster, go on.
func (c *mcController[request]) watchSync(e *engagement, name multicluster.ClusterName, srcs []mcsource.TypedSource[client.Object, request], syncing []syncingWatch[request], attempt context.Context, abandon context.CancelFunc) {
	ctx, cancel := context.WithTimeout(attempt, c.timeout)
	defer cancel()
	for _, s := range syncing {
		err := s.WaitForSync(ctx)
		if err == nil {
			continue
		}
		if attempt.Err() != nil {
			return // disengaged meanwhile
		}
		abandon()
		c.countSyncFailure(name, s.TypedSyncingSource, err)
		c.log.Error(redact.Known.ClusterErr(name, fmt.Errorf("%v did not sync: %w", s.of, err)), "Watch failed; this controller stops watching the cluster and retries with backoff",
			"cluster", clusterLabel(name))
		c.retryAfter(e, name, srcs, retryMinBackoff)
		return
	}
}

// startWithRetry starts srcs in a cluster that was engaged before the
// controller ran: nobody waits for the outcome, so a failure is logged and the
// sources are started again with backoff until they run or the cluster
// disengages. A cluster that was unreachable when the controller started is
// watched once it is back.
func (c *mcController[request]) startWithRetry(e *engagement, name multicluster.ClusterName, srcs []mcsource.TypedSource[client.Object, request]) {
	c.retryAfter(e, name, srcs, 0)
}

// retryAfter starts srcs in the cluster after wait, then with backoff until
// they run or the cluster disengages.
func (c *mcController[request]) retryAfter(e *engagement, name multicluster.ClusterName, srcs []mcsource.TypedSource[client.Object, request], wait time.Duration) {
	log := c.log.WithValues("cluster", clusterLabel(name))
	if wait > 0 {
		timer := time.NewTimer(wait)
		select {
		case <-e.ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
	backoff := max(retryMinBackoff, 2*wait)
	for {
		err := c.startSources(e, name, srcs, true)
		if err == nil || e.ctx.Err() != nil {
			return
		}
		log.Error(redact.Known.ClusterErr(name, err), "Failed to watch cluster, retrying", "retryIn", backoff.String())
		timer := time.NewTimer(backoff)
		select {
		case <-e.ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		backoff = min(2*backoff, retryMaxBackoff)
	}
}

// Backoff between attempts to watch a cluster engaged before the controller ran.
const (
	retryMinBackoff = time.Second
	retryMaxBackoff = 2 * time.Minute
)

// forget removes the engagement e of name, unless it was replaced.
func (c *mcController[request]) forget(name multicluster.ClusterName, e *engagement) {
	c.mu.Lock()
	c.clusters.CompareAndDelete(name, e)
	c.mu.Unlock()
}

func clusterLabel(name multicluster.ClusterName) string {
	if name == "" {
		return "<host>"
	}
	return name
}

// queueSource is the one controller-runtime source of the wrapped controller.
// Its Start hands over the controller's queue, which starts every source in
// every cluster engaged so far.
type queueSource[request mcreconcile.ClusterAware[request]] struct{ c *mcController[request] }

var _ source.TypedSource[mcreconcile.Request] = &queueSource[mcreconcile.Request]{}

func (s *queueSource[request]) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[request]) error {
	c := s.c
	c.mu.Lock()
	c.queue, c.ctx = q, ctx
	// The host is engaged under the name "" for the controller's lifetime
	// (or its replica's tenures over the host's work, see hostowner.go);
	// sources decide whether they watch it.
	c.startHostLocked(ctx)
	pending := c.engagedLocked()
	srcs := append([]mcsource.TypedSource[client.Object, request](nil), c.sources...)
	c.mu.Unlock()

	// When the controller stops, so do its watches in every cluster.
	context.AfterFunc(ctx, func() {
		c.mu.Lock()
		for _, e := range c.engagedLocked() {
			e.cancel()
		}
		c.mu.Unlock()
	})

	// Start clusters concurrently and without blocking the controller: one
	// unreachable cluster must not hold back the others or the workers.
	for name, e := range pending {
		go c.startWithRetry(e, name, srcs)
	}
	return nil
}

func (s *queueSource[request]) String() string {
	return fmt.Sprintf("multi-cluster sources of %q", s.c.name)
}
