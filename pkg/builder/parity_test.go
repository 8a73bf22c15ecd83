package builder_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mccontroller "github.com/mcruntime/multicluster-runtime/pkg/controller"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"
)

// keyRequest is a request type of the user's own: a "namespace/name" key and
// the cluster it belongs to.
type keyRequest struct {
	Key         string
	ClusterName multicluster.ClusterName
}

func (r keyRequest) Cluster() multicluster.ClusterName { return r.ClusterName }

func (r keyRequest) WithCluster(name multicluster.ClusterName) keyRequest {
	r.ClusterName = name
	return r
}

// keyRecorder records the keyRequests it reconciles.
type keyRecorder struct {
	mu   sync.Mutex
	seen map[keyRequest]int
}

func (r *keyRecorder) Reconcile(_ context.Context, req keyRequest) (reconcile.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[keyRequest]int{}
	}
	r.seen[req]++
	return reconcile.Result{}, nil
}

func (r *keyRecorder) waitFor(t *testing.T, req keyRequest) {
	t.Helper()
	fleettest.Eventually(t, 0, func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.seen[req] == 0 {
			return fmt.Errorf("%+v not reconciled; seen %v", req, r.seen)
		}
		return nil
	})
}

// A controller with its own request type reconciles every member's objects,
// each request carrying the cluster its object lives in (TypedInjectCluster
// sets it whatever the handler returned).
func TestTypedControllerWithOwnRequestType(t *testing.T) {
	e := newEnv(t)
	rec := &keyRecorder{}
	toKey := handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []keyRequest {
		if obj.GetNamespace() != e.ns {
			return nil
		}
		// The cluster set here is overwritten by TypedInjectCluster.
		return []keyRequest{{Key: obj.GetNamespace() + "/" + obj.GetName(), ClusterName: "ignored"}}
	})
	must(t, mcbuilder.TypedControllerManagedBy[keyRequest](e.mgr).
		Named(e.ns).
		Watches(&corev1.ConfigMap{}, mchandler.TypedInjectCluster[client.Object, keyRequest](toKey)).
		Complete(rec))
	e.engage(1)
	e.engage(2)
	fleettest.RunManager(t, e.mgr)

	testbed.CreateConfigMap(t, e.members[0], e.ns, "one", nil)
	testbed.CreateConfigMap(t, e.members[1], e.ns, "two", nil)
	rec.waitFor(t, keyRequest{Key: e.ns + "/one", ClusterName: member(1)})
	rec.waitFor(t, keyRequest{Key: e.ns + "/two", ClusterName: member(2)})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for req := range rec.seen {
		if req.ClusterName == "ignored" {
			t.Errorf("request kept the handler's cluster: %+v", req)
		}
	}
}

// The builder refuses what controller-runtime's builder refuses, with the
// same words, as the upstream design's builder does: its errors start with
// them (the upstream design's tests compare them whole).
func TestBuilderRefusesMisuse(t *testing.T) {
	e := newEnv(t)
	rec := e.recorder()
	for _, tc := range []struct {
		name  string
		build func() error
		want  string
	}{
		{"For twice", func() error {
			return e.builder("a").For(&corev1.ConfigMap{}).For(&corev1.Secret{}).Complete(rec)
		}, "For(...) should only be called once"},
		{"no watches", func() error { return e.builder("b").Complete(rec) }, "there are no watches configured"},
		{"Owns without For", func() error {
			return e.builder("c").Owns(&corev1.Secret{}).Complete(rec)
		}, "Owns() can only be used together with For()"},
		{"neither For nor Named", func() error {
			return mcbuilder.ControllerManagedBy(e.mgr).Watches(&corev1.ConfigMap{}, mchandler.EnqueueRequestForObject).Complete(rec)
		}, "one of For() or Named() must be called"},
		{"nil reconciler", func() error { return e.builder("d").For(&corev1.ConfigMap{}).Complete(nil) }, "must provide a non-nil Reconciler"},
		{"reconciler twice", func() error {
			return e.builder("e").For(&corev1.ConfigMap{}).WithOptions(mccontroller.Options{Reconciler: rec}).Complete(rec)
		}, "reconciler was set via WithOptions() and via Build() or Complete()"},
		{"nil manager", func() error { return mcbuilder.ControllerManagedBy(nil).For(&corev1.ConfigMap{}).Complete(rec) }, "must provide a non-nil Manager"},
		{"For with own request type", func() error {
			return mcbuilder.TypedControllerManagedBy[keyRequest](e.mgr).Named(e.ns + "-f").For(&corev1.ConfigMap{}).Complete(&keyRecorder{})
		}, "For() can only be used with mcreconcile.Request, got builder_test.keyRequest"},
		// An object the scheme does not know: controller-runtime's words, as
		// its builder returns them.
		{"For of a type the scheme does not know", func() error {
			return e.builder("g").For(&unregistered{}).Complete(rec)
		}, "no kind is registered for the type builder_test.unregistered"},
		{"metadata-only watch of a type the scheme does not know", func() error {
			return e.builder("h").WatchesMetadata(&unregistered{}, mchandler.EnqueueRequestForObject).Complete(rec)
		}, "unable to determine GVK of *builder_test.unregistered for a metadata-only watch"},
		{"webhook without a manager", func() error {
			return mcbuilder.WebhookManagedBy(nil, &corev1.ConfigMap{}).Complete()
		}, "must provide a non-nil Manager"},
		{"webhook of a type the scheme does not know", func() error {
			return mcbuilder.WebhookManagedBy(e.mgr, &unregistered{}).Complete()
		}, "no kind is registered for the type builder_test.unregistered"},
		{"duplicate name", func() error {
			if err := e.builder("dup").For(&corev1.ConfigMap{}).Complete(rec); err != nil {
				return fmt.Errorf("first controller: %w", err)
			}
			return e.builder("dup").For(&corev1.ConfigMap{}).Complete(rec)
		}, "controller with name " + e.ns + "-dup already exists"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.build()
			if tc.name == "duplicate name" { // controller-runtime's words, wrapped
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error = %v, want one containing %q", err, tc.want)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error = %v, want one starting with %q", err, tc.want)
			}
		})
	}
}

// unregistered is a ConfigMap under a Go type no scheme knows.
type unregistered struct{ corev1.ConfigMap }

// A map func that names a cluster sends the request there; one that does not
// is sent to the cluster the event came from.
func TestEnqueueWithClusterPreservation(t *testing.T) {
	e := newEnv(t)
	rec := e.recorder()
	must(t, e.builder().
		Watches(&corev1.ConfigMap{}, mchandler.EnqueueRequestsFromMapFuncWithClusterPreservation(func(_ context.Context, obj client.Object) []mcreconcile.Request {
			if obj.GetName() != "source" {
				return nil
			}
			there := fleettest.Request(member(2), obj.GetNamespace(), "mapped-there")
			here := fleettest.Request("", obj.GetNamespace(), "mapped-here")
			return []mcreconcile.Request{there, here}
		})).
		Complete(rec))
	e.engage(1)
	e.engage(2)
	fleettest.RunManager(t, e.mgr)

	testbed.CreateConfigMap(t, e.members[0], e.ns, "source", nil)
	rec.WaitFor(t, 1, member(2), e.ns, "mapped-there")
	rec.WaitFor(t, 1, member(1), e.ns, "mapped-here")
	if n := rec.Count("", e.ns, "mapped-here"); n != 0 {
		t.Errorf("the request without a cluster went to the host %d times", n)
	}
}

// plainHandler enqueues every object with Add, knowing nothing of priorities.
type plainHandler struct{}

func (plainHandler) Create(_ context.Context, evt event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(evt.Object)})
}
func (plainHandler) Update(context.Context, event.UpdateEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}
func (plainHandler) Delete(context.Context, event.DeleteEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}
func (plainHandler) Generic(context.Context, event.GenericEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

// priorityRecorder is controller-runtime's priority queue that remembers the
// priority each request was last added with.
type priorityRecorder struct {
	priorityqueue.PriorityQueue[mcreconcile.Request]
	mu   sync.Mutex
	prio map[mcreconcile.Request]int
}

func (p *priorityRecorder) AddWithOpts(o priorityqueue.AddOpts, items ...mcreconcile.Request) {
	p.mu.Lock()
	for _, item := range items {
		if o.Priority != nil {
			p.prio[item] = *o.Priority
		} else {
			p.prio[item] = 0
		}
	}
	p.mu.Unlock()
	p.PriorityQueue.AddWithOpts(o, items...)
}

func (p *priorityRecorder) priority(req mcreconcile.Request) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prio, ok := p.prio[req]
	return prio, ok
}

// WithLowPriorityWhenUnchanged puts a member's initial list behind live
// events, for a handler that knows nothing of priorities.
func TestWithLowPriorityWhenUnchanged(t *testing.T) {
	e := newEnv(t)
	rec := e.recorder()
	var q *priorityRecorder
	opts := mccontroller.Options{
		NewQueue: func(name string, rl workqueue.TypedRateLimiter[mcreconcile.Request]) workqueue.TypedRateLimitingInterface[mcreconcile.Request] {
			q = &priorityRecorder{
				PriorityQueue: priorityqueue.New(name, func(o *priorityqueue.Opts[mcreconcile.Request]) { o.RateLimiter = rl }),
				prio:          map[mcreconcile.Request]int{},
			}
			return q
		},
	}
	must(t, e.builder().
		WithOptions(opts).
		Watches(&corev1.ConfigMap{}, mchandler.WithLowPriorityWhenUnchanged(mchandler.Lift[client.Object](plainHandler{}))).
		Complete(rec))
	testbed.CreateConfigMap(t, e.members[0], e.ns, "listed", nil)
	fleettest.RunManager(t, e.mgr)
	e.engage(1)
	rec.WaitFor(t, 1, member(1), e.ns, "listed")
	testbed.CreateConfigMap(t, e.members[0], e.ns, "live", nil)
	rec.WaitFor(t, 1, member(1), e.ns, "live")

	if prio, ok := q.priority(fleettest.Request(member(1), e.ns, "listed")); !ok || prio != handler.LowPriority {
		t.Errorf("initial-list object added with priority %d (recorded: %v), want %d", prio, ok, handler.LowPriority)
	}
	if prio, ok := q.priority(fleettest.Request(member(1), e.ns, "live")); !ok || prio != 0 {
		t.Errorf("live object added with priority %d (recorded: %v), want 0", prio, ok)
	}
}

// Kind(...).WithClusterFilter watches only the clusters the filter accepts,
// in both of upstream's forms: chained, and called for its effect.
func TestKindWithClusterFilter(t *testing.T) {
	for _, form := range []string{"chained", "for its effect"} {
		t.Run(form, func(t *testing.T) { testKindWithClusterFilter(t, form == "chained") })
	}
}

func testKindWithClusterFilter(t *testing.T, chained bool) {
	e := newEnv(t)
	rec := e.recorder()
	var filter mcsource.ClusterFilterFunc = func(name multicluster.ClusterName, _ cluster.Cluster) bool { return name == member(1) }
	src := mcsource.Kind(&corev1.ConfigMap{}, mchandler.TypedEnqueueRequestForObject[*corev1.ConfigMap]())
	if chained {
		src = src.WithClusterFilter(filter)
	} else {
		src.WithClusterFilter(filter)
	}
	must(t, e.builder().WatchesRawSource(src).Complete(rec))
	e.engage(1)
	e.engage(2)
	fleettest.RunManager(t, e.mgr)

	testbed.CreateConfigMap(t, e.members[0], e.ns, "in-1", nil)
	rec.WaitFor(t, 1, member(1), e.ns, "in-1")
	// The filtered source is not started in member 2 at all.
	for _, name := range []string{"", member(2)} {
		cl := e.mgr.GetLocalManager()
		if name != "" {
			c, err := e.mgr.GetCluster(t.Context(), name)
			must(t, err)
			if got, ok, err := src.ForCluster(name, c); err != nil || got != nil || ok {
				t.Errorf("cluster %q: ForCluster = %v, %v, %v; want no source", name, got, ok, err)
			}
			continue
		}
		if got, ok, err := src.ForCluster(name, cl); err != nil || got != nil || ok {
			t.Errorf("host: ForCluster = %v, %v, %v; want no source", got, ok, err)
		}
	}
}
