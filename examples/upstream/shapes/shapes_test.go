package shapes_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/mcruntime/multicluster-runtime/examples/upstream/shapes"
	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/apis/v1alpha1"
	"github.com/mcruntime/multicluster-runtime/providers/multi"
	"github.com/mcruntime/multicluster-runtime/providers/nop"
)

// fakeCluster is a cluster.Cluster that is never called beyond the methods
// below: the registry and the handlers only pass it around, and a source
// asks it for its cache, scheme and reader when it is made.
type fakeCluster struct{ cluster.Cluster }

func (*fakeCluster) GetAPIReader() client.Reader { return nil }
func (*fakeCluster) GetCache() cache.Cache       { return nil }
func (*fakeCluster) GetScheme() *runtime.Scheme  { return scheme.Scheme }

func TestRegistryInUpstreamsShape(t *testing.T) {
	r := clusters.NewRegistry[cluster.Cluster]()
	cl := &fakeCluster{}
	seen, err := shapes.RegistryCalls(t.Context(), r, "a", cl)
	if err != nil || !slices.Equal(seen, []multicluster.ClusterName{"a"}) {
		t.Fatalf("RegistryCalls = %v, %v; want [a]", seen, err)
	}
	if names := r.ClusterNames(); len(names) != 0 {
		t.Fatalf("RemoveIfEqual left %v", names)
	}
	// Add of a name recorded already fails, as upstream's does.
	if err := r.Add(t.Context(), "a", cl); err != nil {
		t.Fatal(err)
	}
	if _, err := shapes.RegistryCalls(t.Context(), r, "a", cl); !errors.Is(err, clusters.ErrClusterExists) {
		t.Fatalf("Add of a recorded name: %v, want ErrClusterExists", err)
	}
}

func TestMapFuncKeepsTheEventsCluster(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[mcreconcile.Request]())
	defer q.ShutDown()
	profile := &v1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "east"}}
	shapes.MapToRequests()("member-1", nil).Create(t.Context(), event.TypedCreateEvent[*v1alpha1.ClusterProfile]{Object: profile}, q)
	if q.Len() != 1 {
		t.Fatalf("%d requests, want 1", q.Len())
	}
	if req, _ := q.Get(); req.ClusterName != "member-1" || req.Name != "east" {
		t.Fatalf("request %+v, want fleet/east in member-1", req)
	}
}

func TestForClusterHandlerFirst(t *testing.T) {
	h, typed := shapes.OneCluster("eu-1")
	for name, create := range map[string]func(workqueue.TypedRateLimitingInterface[mcreconcile.Request]){
		"ForCluster": func(q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
			h.Create(t.Context(), event.CreateEvent{Object: &v1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Name: "a"}}}, q)
		},
		"TypedForCluster": func(q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
			typed.Create(t.Context(), event.TypedCreateEvent[*v1alpha1.ClusterProfile]{Object: &v1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Name: "a"}}}, q)
		},
	} {
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[mcreconcile.Request]())
		create(q)
		if req, _ := q.Get(); req.ClusterName != "eu-1" || req.Name != "a" {
			t.Errorf("%s: request %+v, want a in eu-1", name, req)
		}
		q.ShutDown()
	}
}

func TestSourceForClusterSaysWhetherItWatches(t *testing.T) {
	// A source without a cluster filter watches every cluster: true. A
	// cluster it cannot watch (no cache) is only found when it starts.
	src, ok, err := shapes.Source("a", &fakeCluster{})
	if err != nil || !ok || src == nil {
		t.Fatalf("ForCluster = %v, %v, %v; want a source and true", src, ok, err)
	}
	syncing, ok, err := shapes.SyncingSource("a", &fakeCluster{})
	if err != nil || !ok || syncing == nil {
		t.Fatalf("SyncingForCluster = %v, %v, %v; want a source and true", syncing, ok, err)
	}
}

func TestNopRunsUntilItsContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- shapes.Nop().Start(ctx, multicluster.AwareFunc(nil)) }()
	select {
	case err := <-done:
		t.Fatalf("Start returned before its context ended: %v", err)
	default:
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The nop provider runs, so AsRunnable returns it as it is.
	p := nop.New()
	if shapes.Runnable(p, nil) != multi.RunnableProvider(p) {
		t.Fatal("AsRunnable wrapped the nop provider, which runs")
	}
}

func TestNamespaceNameOfAnotherCluster(t *testing.T) {
	if name, ok := shapes.NamespaceName(&fakeCluster{}); ok || name != "" {
		t.Fatalf("NamespaceName of a cluster that is not a namespace's = %q, %v", name, ok)
	}
}
