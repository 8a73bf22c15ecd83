package controller_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/go-logr/logr"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mccontroller "github.com/mcruntime/multicluster-runtime/pkg/controller"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// fleet: member 0 is the host, member 1 a cluster to engage. Tests that
// only need a manager (the controller's host) and requests use fake sources;
// those that watch objects use the real members.
var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	testbed.MustProvideAssets()
	fleettest.RunMain(m, 2, func(f *fleettest.Fleet) { fleet = f })
}

// newManager returns a manager for the host (member 0) without a provider.
// It is not started: an unmanaged controller only needs it for its host
// cluster and fleet engine.
func newManager(t *testing.T, opts ...mcmanager.Option) mcmanager.Manager {
	t.Helper()
	return newLoggingManager(t, logr.Discard(), opts...)
}

// newLoggingManager is newManager with a logger, which the controller uses.
func newLoggingManager(t *testing.T, log logr.Logger, opts ...mcmanager.Option) mcmanager.Manager {
	t.Helper()
	mgr, err := mcmanager.New(fleet.Config(0), nil, mcmanager.Options{
		Metrics:                server.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Logger:                 log,
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

// newController returns an unmanaged controller with a name of its own
// (controller-runtime refuses a name twice in a process; metrics carry it).
func newController(t *testing.T, mgr mcmanager.Manager, opts mccontroller.Options) (mccontroller.Controller, string) {
	t.Helper()
	name := testbed.Name("ctl")
	c, err := mccontroller.NewUnmanaged(name, mgr, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c, name
}

// run starts c until the test ends and returns once it runs, with its queue
// (see queueTap) and the function that stops it. Engaging before run returns
// is engaging before Start.
func run(t *testing.T, c mccontroller.Controller) (workqueue.TypedRateLimitingInterface[mcreconcile.Request], func()) {
	t.Helper()
	tap := newQueueTap()
	if err := c.MultiClusterWatch(tap); err != nil {
		t.Fatal(err)
	}
	stop := fleettest.RunManager(t, c)
	return tap.queue(t), stop
}

// queueTap is a source that hands the test the controller's queue once the
// controller runs: it watches only the host, which is engaged for the
// controller's lifetime. Requests added to it reach the reconciler as if a
// watch had produced them, for any cluster name.
type queueTap struct {
	ch chan workqueue.TypedRateLimitingInterface[mcreconcile.Request]
}

func newQueueTap() *queueTap {
	return &queueTap{ch: make(chan workqueue.TypedRateLimitingInterface[mcreconcile.Request], 1)}
}

func (q *queueTap) ForCluster(name multicluster.ClusterName, _ cluster.Cluster) (source.TypedSource[mcreconcile.Request], bool, error) {
	if name != "" {
		return nil, false, nil
	}
	return source.TypedFunc[mcreconcile.Request](func(_ context.Context, queue workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
		q.ch <- queue
		return nil
	}), true, nil
}

// queue waits for the controller to start the tap.
func (q *queueTap) queue(t *testing.T) workqueue.TypedRateLimitingInterface[mcreconcile.Request] {
	t.Helper()
	select {
	case queue := <-q.ch:
		q.ch <- queue // for the next caller
		return queue
	case <-time.After(fleettest.DefaultTimeout):
		t.Fatal("the controller did not start its sources in the host")
		return nil
	}
}

// fakeSource is a source of no events whose watches sync when the test says
// so (or fail to, with syncErr). It records every cluster it was started in,
// with the context the start got, and offers itself to every cluster but the
// host.
type fakeSource struct {
	synced  chan struct{} // closed: every watch has synced
	syncErr error         // non-nil: WaitForSync fails with it at once

	mu     sync.Mutex
	starts []fakeStart
}

// fakeStart is one start of a fakeSource in a cluster.
type fakeStart struct {
	name multicluster.ClusterName
	cl   cluster.Cluster
	ctx  context.Context
}

func newFakeSource() *fakeSource { return &fakeSource{synced: make(chan struct{})} }

func syncedSource() *fakeSource {
	s := newFakeSource()
	close(s.synced)
	return s
}

func (s *fakeSource) ForCluster(name multicluster.ClusterName, cl cluster.Cluster) (source.TypedSource[mcreconcile.Request], bool, error) {
	if name == "" {
		return nil, false, nil
	}
	return &fakeWatch{s: s, name: name, cl: cl}, true, nil
}

func (s *fakeSource) String() string { return "fake source" }

// started returns the starts so far.
func (s *fakeSource) started() []fakeStart {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]fakeStart(nil), s.starts...)
}

// waitStarted waits until the source has been started n times and returns the starts.
func (s *fakeSource) waitStarted(t *testing.T, n int) []fakeStart {
	t.Helper()
	fleettest.Eventually(t, 0, func() error {
		if got := len(s.started()); got < n {
			return fmt.Errorf("started %d times, want %d", got, n)
		}
		return nil
	})
	return s.started()
}

type fakeWatch struct {
	s    *fakeSource
	name multicluster.ClusterName
	cl   cluster.Cluster
}

var _ source.TypedSyncingSource[mcreconcile.Request] = &fakeWatch{}

func (w *fakeWatch) Start(ctx context.Context, _ workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
	w.s.mu.Lock()
	w.s.starts = append(w.s.starts, fakeStart{name: w.name, cl: w.cl, ctx: ctx})
	w.s.mu.Unlock()
	return nil
}

func (w *fakeWatch) WaitForSync(ctx context.Context) error {
	if w.s.syncErr != nil {
		return w.s.syncErr
	}
	select {
	case <-w.s.synced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *fakeWatch) String() string { return "fake watch of " + w.name }

// done reports whether ctx has ended.
func done(ctx context.Context) bool { return ctx.Err() != nil }

// fakeCluster stands for a cluster.Cluster that fake sources never use: an
// engagement tells clusters apart by identity.
type fakeCluster struct {
	cluster.Cluster
	id int
}

func newFakeCluster(id int) cluster.Cluster { return &fakeCluster{id: id} }

// dropped reads multicluster_dropped_requests_total for controller and reason.
func dropped(controller, reason string) float64 {
	return testutil.ToFloat64(metrics.DroppedRequests.WithLabelValues(controller, reason))
}

var errTest = errors.New("test error")
