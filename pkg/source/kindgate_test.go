package source_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mccontroller "github.com/mcruntime/multicluster-runtime/pkg/controller"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"
)

// informerCluster is a cluster whose cache holds one fake informer, for
// ConfigMaps, not synced until the test says so.
type informerCluster struct {
	readerCounter
	informer *controllertest.FakeInformer
}

func (c *informerCluster) GetCache() crcache.Cache {
	return &informertest.FakeInformers{InformersByGVK: map[schema.GroupVersionKind]toolscache.SharedIndexInformer{
		{Version: "v1", Kind: "ConfigMap"}: c.informer,
	}}
}

// A cluster's watch holds what its handler adds until the informer has
// delivered its initial list, then passes it on, tagged with the cluster,
// in order; later events go through at once. This holds for a lifted
// controller-runtime handler (which Kind hands its one queue wrapper
// directly) and for a handler of the controller's own requests alike.
func TestKindHoldsUntilSyncedAndTags(t *testing.T) {
	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	}
	req := func(cluster multicluster.ClusterName, name string) mcreconcile.Request {
		return mcreconcile.Request{ClusterName: cluster, Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}}
	}
	for name, h := range map[string]mchandler.TypedEventHandlerFunc[client.Object, mcreconcile.Request]{
		"lifted": mchandler.TypedEnqueueRequestForObject[client.Object](),
		"cluster requests": mchandler.TypedEnqueueClusterRequestsFromMapFunc(func(_ context.Context, cl multicluster.ClusterName, o client.Object) []mcreconcile.Request {
			return []mcreconcile.Request{req(cl, o.GetName())}
		}),
	} {
		t.Run(name, func(t *testing.T) {
			cl := &informerCluster{informer: controllertest.NewFakeInformer()}
			src, ok, err := mcsource.Kind[client.Object](&corev1.ConfigMap{}, h).ForCluster("member", cl)
			if err != nil || !ok {
				t.Fatalf("ForCluster: %v, %v", ok, err)
			}
			q := mccontroller.FairQueue(mccontroller.Options{})("", workqueue.DefaultTypedControllerRateLimiter[mcreconcile.Request]())
			defer q.ShutDown()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if err := src.Start(ctx, q); err != nil {
				t.Fatal(err)
			}
			cl.informer.Add(cm("a"))
			cl.informer.Add(cm("b"))
			if n := q.Len(); n != 0 {
				t.Fatalf("%d requests queued before the initial list is in, want 0", n)
			}
			cl.informer.Synced()
			for deadline := time.Now().Add(10 * time.Second); q.Len() < 2; {
				if time.Now().After(deadline) {
					t.Fatalf("%d requests queued 10s after the sync, want 2", q.Len())
				}
				time.Sleep(time.Millisecond)
			}
			cl.informer.Add(cm("c"))
			var got []mcreconcile.Request
			for range 3 {
				r, _ := q.Get()
				got = append(got, r)
				q.Done(r)
			}
			if want := []mcreconcile.Request{req("member", "a"), req("member", "b"), req("member", "c")}; !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
}
