package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"
)

// Options are controller-runtime's controller options for multi-cluster
// requests. CacheSyncTimeout (default 2 minutes) also bounds how long engaging
// one cluster may take: a cluster whose watches cannot be set up within it
// fails to engage, without delaying the others.
type Options = controller.TypedOptions[mcreconcile.Request]

// Controller is a controller-runtime controller that is also multicluster.Aware.
type Controller interface {
	controller.TypedController[mcreconcile.Request]
	multicluster.Aware

	// MultiClusterWatch starts src in every cluster engaged now and later.
	MultiClusterWatch(src mcsource.Source) error
}

// New returns a controller added to mgr: it starts with the manager and is
// engaged with every cluster the manager engages.
func New(name string, mgr mcmanager.Manager, options Options) (Controller, error) {
	options.DefaultFromConfig(mgr.GetControllerOptions())
	c, err := NewUnmanaged(name, mgr, options)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(c); err != nil {
		return nil, fmt.Errorf("controller %q: adding to manager: %w", name, err)
	}
	return c, nil
}

// NewUnmanaged returns a controller that the caller starts and engages.
// mgr supplies the host cluster, offered to sources under the name "".
func NewUnmanaged(name string, mgr mcmanager.Manager, options Options) (Controller, error) {
	if options.Reconciler == nil {
		return nil, fmt.Errorf("controller %q: must specify Reconciler", name)
	}
	c := &mcController{
		name:     name,
		host:     mgr.GetLocalManager(),
		clusters: map[multicluster.ClusterName]*engagement{},
		timeout:  options.CacheSyncTimeout,
	}
	if c.timeout <= 0 {
		c.timeout = 2 * time.Minute
	}
	if options.NewQueue == nil {
		options.NewQueue = FairQueue(options)
	}
	user := options.Reconciler
	options.Reconciler = mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
		if !c.isEngaged(req.ClusterName) {
			// The cluster left after this request was queued: drop it, do not retry.
			return reconcile.Result{}, nil
		}
		return user.Reconcile(ctx, req)
	})
	inner, err := controller.NewTypedUnmanaged(name, options)
	if err != nil {
		return nil, err
	}
	c.TypedController = inner
	if err := inner.Watch(&queueSource{c: c}); err != nil {
		return nil, err
	}
	return c, nil
}

type mcController struct {
	controller.TypedController[mcreconcile.Request]

	name    string
	host    cluster.Cluster
	timeout time.Duration

	mu       sync.RWMutex
	sources  []mcsource.Source
	clusters map[multicluster.ClusterName]*engagement
	queue    workqueue.TypedRateLimitingInterface[mcreconcile.Request] // set when the controller starts
	ctx      context.Context                                           // the controller's, set with queue
}

// engagement is one cluster's membership in this controller.
type engagement struct {
	cl     cluster.Cluster
	ctx    context.Context
	cancel context.CancelFunc
}

var _ Controller = &mcController{}

// NeedLeaderElection reports whether the wrapped controller waits for leadership.
func (c *mcController) NeedLeaderElection() bool {
	if le, ok := c.TypedController.(manager.LeaderElectionRunnable); ok {
		return le.NeedLeaderElection()
	}
	return true
}

// Engage starts every source of the controller in the cluster. Before the
// controller has started, the cluster is remembered and its sources start
// with the controller.
func (c *mcController) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	if name == "" {
		return errors.New(`the cluster name "" is reserved for the host cluster`)
	}
	e, srcs, err := c.engage(ctx, name, cl)
	if err != nil || e == nil || srcs == nil {
		return err
	}
	if err := c.startSources(e, name, srcs); err != nil {
		// Refused: whoever engages the cluster hears of it and decides.
		c.forget(name, e)
		e.cancel()
		return err
	}
	return nil
}

// engage records the engagement and replaces a previous one under the same
// name. It returns a nil engagement when cl is already engaged under name,
// and the sources to start in the cluster, nil before the controller runs.
// Both are decided under one lock, so that a concurrent MultiClusterWatch
// starts its source in this cluster or leaves it to us, never both.
func (c *mcController) engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) (*engagement, []mcsource.Source, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.clusters[name]; ok && old.cl == cl && old.ctx.Err() == nil {
		return nil, nil, nil
	}
	if c.ctx != nil && c.ctx.Err() != nil {
		return nil, nil, fmt.Errorf("controller %q: cluster %q: controller has stopped", c.name, name)
	}
	ectx, cancel := context.WithCancel(ctx)
	e := &engagement{cl: cl, ctx: ectx, cancel: cancel}
	if old, ok := c.clusters[name]; ok {
		old.cancel()
	}
	c.clusters[name] = e
	context.AfterFunc(ectx, func() { c.forget(name, e) })
	if c.queue == nil {
		return e, nil, nil
	}
	return e, append([]mcsource.Source{}, c.sources...), nil
}

func (c *mcController) isEngaged(name multicluster.ClusterName) bool {
	if name == "" {
		return true
	}
	c.mu.RLock()
	_, ok := c.clusters[name]
	c.mu.RUnlock()
	return ok
}

// MultiClusterWatch adds src and, once the controller runs, starts it in every
// engaged cluster.
func (c *mcController) MultiClusterWatch(src mcsource.Source) error {
	c.mu.Lock()
	c.sources = append(c.sources, src)
	var engaged map[multicluster.ClusterName]*engagement
	if c.queue != nil {
		engaged = make(map[multicluster.ClusterName]*engagement, len(c.clusters))
		for name, e := range c.clusters {
			engaged[name] = e
		}
	}
	c.mu.Unlock()

	// Concurrently: an unreachable cluster costs its timeout once, not per cluster.
	errs := make(chan error, len(engaged))
	for name, e := range engaged {
		go func() { errs <- c.startSources(e, name, []mcsource.Source{src}) }()
	}
	var all []error
	for range engaged {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// startSources starts srcs in one cluster, bounded by the controller's
// CacheSyncTimeout. On failure, whatever this attempt registered is removed
// again; the engagement itself stays, for the caller to end or retry.
func (c *mcController) startSources(e *engagement, name multicluster.ClusterName, srcs []mcsource.Source) error {
	c.mu.RLock()
	q := c.queue
	c.mu.RUnlock()

	// The sources live as long as the engagement, unless this attempt fails.
	attempt, abandon := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() {
		var errs []error
		for _, s := range srcs {
			src, err := s.ForCluster(name, e.cl)
			if err == nil && src != nil {
				err = src.Start(attempt, q)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("starting %v: %w", s, err))
			}
		}
		done <- errors.Join(errs...)
	}()

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
		return fmt.Errorf("controller %q: cluster %q: %w", c.name, clusterLabel(name), err)
	}
	_ = abandon // the attempt's context now ends with the engagement's
	return nil
}

// startWithRetry starts srcs in a cluster that was engaged before the
// controller ran: nobody waits for the outcome, so a failure is logged and the
// sources are started again with backoff until they run or the cluster
// disengages. A cluster that was unreachable when the controller started is
// watched once it is back.
func (c *mcController) startWithRetry(e *engagement, name multicluster.ClusterName, srcs []mcsource.Source) {
	log := c.GetLogger().WithValues("cluster", clusterLabel(name))
	backoff := retryMinBackoff
	for {
		err := c.startSources(e, name, srcs)
		if err == nil || e.ctx.Err() != nil {
			return
		}
		log.Error(err, "Failed to watch cluster, retrying", "retryIn", backoff.String())
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
func (c *mcController) forget(name multicluster.ClusterName, e *engagement) {
	c.mu.Lock()
	if c.clusters[name] == e {
		delete(c.clusters, name)
	}
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
type queueSource struct{ c *mcController }

var _ source.TypedSource[mcreconcile.Request] = &queueSource{}

func (s *queueSource) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
	c := s.c
	c.mu.Lock()
	c.queue, c.ctx = q, ctx
	hostCtx, cancelHost := context.WithCancel(ctx)
	// The host is engaged for the controller's lifetime under the name "";
	// sources decide whether they watch it.
	c.clusters[""] = &engagement{cl: c.host, ctx: hostCtx, cancel: cancelHost}
	pending := make(map[multicluster.ClusterName]*engagement, len(c.clusters))
	for name, e := range c.clusters {
		pending[name] = e
	}
	srcs := append([]mcsource.Source(nil), c.sources...)
	c.mu.Unlock()

	// When the controller stops, so do its watches in every cluster.
	context.AfterFunc(ctx, func() {
		c.mu.Lock()
		for _, e := range c.clusters {
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

func (s *queueSource) String() string { return fmt.Sprintf("multi-cluster sources of %q", s.c.name) }
