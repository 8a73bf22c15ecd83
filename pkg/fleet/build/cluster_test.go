package build_test

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet/build"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// startCluster runs cl until the test ends, and returns a function that
// stops it and waits for its Start to return.
func startCluster(t *testing.T, cl cluster.Cluster) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cl.Start(ctx) }()
	stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	}
	t.Cleanup(func() {
		if ctx.Err() == nil {
			stop()
		}
	})
	if !cl.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	return stop
}

// namespaceWithConfigMap creates a fresh namespace holding one ConfigMap.
func namespaceWithConfigMap(t *testing.T, c client.Client, prefix string) *corev1.ConfigMap {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "subject"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

func droppedEvents(reason string) float64 {
	return testutil.ToFloat64(metrics.DroppedRequests.WithLabelValues("event-recorder", reason))
}

func TestNewClusterRecordsEventsOfBothAPIsOnceAsked(t *testing.T) {
	cl, err := build.NewCluster(fleet.Config(0))
	if err != nil {
		t.Fatal(err)
	}
	cm := namespaceWithConfigMap(t, cl.GetClient(), "events")
	stop := startCluster(t, cl)
	if build.EventsStarted(cl) {
		t.Fatal("the event broadcasters were made before anything was recorded")
	}

	//lint:ignore SA1019 the old events API is still part of cluster.Cluster.
	cl.GetEventRecorderFor("legacy-recorder").Event(cm, corev1.EventTypeNormal, "LegacyReason", "recorded through core/v1")
	cl.GetEventRecorder("events-recorder").Eventf(cm, nil, corev1.EventTypeNormal, "NewReason", "Testing", "recorded through %s", "events.k8s.io/v1")
	if !build.EventsStarted(cl) {
		t.Fatal("recording did not make the broadcasters")
	}
	reader := cl.GetAPIReader()
	fleettest.Eventually(t, 30*time.Second, func() error {
		var evs corev1.EventList
		if err := reader.List(context.Background(), &evs, client.InNamespace(cm.Namespace)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == "LegacyReason" && e.Source.Component == "legacy-recorder" && e.InvolvedObject.Name == cm.Name {
				return nil
			}
		}
		return fmt.Errorf("no core/v1 Event of legacy-recorder among %d", len(evs.Items))
	})
	fleettest.Eventually(t, 30*time.Second, func() error {
		var evs eventsv1.EventList
		if err := reader.List(context.Background(), &evs, client.InNamespace(cm.Namespace)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == "NewReason" && e.ReportingController == "events-recorder" && e.Regarding.Name == cm.Name {
				return nil
			}
		}
		return fmt.Errorf("no events.k8s.io/v1 Event of events-recorder among %d", len(evs.Items))
	})

	// Once the cluster stopped, Events are dropped, and counted.
	stop()
	before := droppedEvents("cluster-stopped")
	//lint:ignore SA1019 the old events API is still part of cluster.Cluster.
	cl.GetEventRecorderFor("legacy-recorder").Event(cm, corev1.EventTypeNormal, "Late", "after the stop")
	cl.GetEventRecorder("events-recorder").Eventf(cm, nil, corev1.EventTypeNormal, "Late", "Testing", "after the stop")
	if got := droppedEvents("cluster-stopped") - before; got != 2 {
		t.Fatalf("Events recorded after the stop: %v counted as dropped, want 2", got)
	}
}

func TestNewClusterStoppedBeforeRecordingMakesNoBroadcaster(t *testing.T) {
	cl, err := build.NewCluster(fleet.Config(0))
	if err != nil {
		t.Fatal(err)
	}
	startCluster(t, cl)()
	before := droppedEvents("cluster-stopped")
	//lint:ignore SA1019 the old events API is still part of cluster.Cluster.
	cl.GetEventRecorderFor("late").Event(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "x"}}, corev1.EventTypeNormal, "Late", "after the stop")
	if build.EventsStarted(cl) {
		t.Fatal("a recorder of a stopped cluster made broadcasters (they would never be shut down)")
	}
	if got := droppedEvents("cluster-stopped") - before; got != 1 {
		t.Fatalf("%v Events counted as dropped, want 1", got)
	}
}

func TestNewClusterAPIReaderReadsTheServer(t *testing.T) {
	cl, err := build.NewCluster(fleet.Config(0))
	if err != nil {
		t.Fatal(err)
	}
	// The cache never starts: only a reader of the API server can see it.
	cm := namespaceWithConfigMap(t, cl.GetClient(), "reader")
	r := cl.GetAPIReader()
	if r != cl.GetAPIReader() {
		t.Fatal("GetAPIReader built a second reader")
	}
	var got corev1.ConfigMap
	if err := r.Get(context.Background(), client.ObjectKeyFromObject(cm), &got); err != nil {
		t.Fatal(err)
	}
	if got.UID != cm.UID {
		t.Fatalf("read %q, want the created ConfigMap %q", got.UID, cm.UID)
	}
}

// TestNewClusterHonoursClusterOptions passes every cluster.Options field a
// provider may set and checks that the cluster was built with it.
func TestNewClusterHonoursClusterOptions(t *testing.T) {
	setup, err := client.New(fleet.Config(0), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	watched := namespaceWithConfigMap(t, setup, "options")
	other := namespaceWithConfigMap(t, setup, "options-other")

	sch := scheme.Scheme // a scheme of the options' own is still the one used
	var newClients, newCaches, mappers atomic.Int32
	var mapper meta.RESTMapper
	broadcaster := record.NewBroadcaster()
	defer broadcaster.Shutdown()
	seen := make(chan string, 10)
	watcher := broadcaster.StartEventWatcher(func(e *corev1.Event) { seen <- e.Reason })
	defer watcher.Stop()

	cl, err := build.NewCluster(fleet.Config(0), func(o *cluster.Options) {
		o.Scheme = sch
		o.Cache.DefaultNamespaces = map[string]cache.Config{watched.Namespace: {}}
		o.MapperProvider = func(c *rest.Config, hc *http.Client) (meta.RESTMapper, error) {
			mappers.Add(1)
			m, err := build.NewLazyRESTMapper(c, hc)
			mapper = m
			return m, err
		}
		o.NewCache = func(c *rest.Config, opts cache.Options) (cache.Cache, error) {
			newCaches.Add(1)
			return cache.New(c, opts)
		}
		o.NewClient = func(c *rest.Config, opts client.Options) (client.Client, error) {
			newClients.Add(1)
			return client.New(c, opts)
		}
		//lint:ignore SA1019 providers may still pass it; NewCluster honours it.
		o.EventBroadcaster = broadcaster
	})
	if err != nil {
		t.Fatal(err)
	}
	if newClients.Load() != 1 || newCaches.Load() != 1 || mappers.Load() != 1 {
		t.Fatalf("NewClient, NewCache, MapperProvider called %d, %d, %d times, want once each", newClients.Load(), newCaches.Load(), mappers.Load())
	}
	if cl.GetScheme() != sch || cl.GetRESTMapper() != mapper {
		t.Fatal("the cluster does not use the options' scheme and mapper")
	}
	startCluster(t, cl)

	// The cache is restricted to the options' namespace, and the client reads it.
	var got corev1.ConfigMap
	if err := cl.GetClient().Get(context.Background(), client.ObjectKeyFromObject(watched), &got); err != nil {
		t.Fatalf("reading from the watched namespace: %v", err)
	}
	if err := cl.GetClient().Get(context.Background(), client.ObjectKeyFromObject(other), &got); err == nil {
		t.Fatal("the cache served a namespace the options left out")
	}
	gvk, err := cl.GetRESTMapper().RESTMapping(schema.GroupKind{Kind: "ConfigMap"})
	if err != nil || gvk.Resource.Resource != "configmaps" {
		t.Fatalf("mapping ConfigMap: %v, %v", gvk, err)
	}

	// The old events API records through the application's broadcaster.
	//lint:ignore SA1019 the old events API is still part of cluster.Cluster.
	cl.GetEventRecorderFor("options").Event(watched, corev1.EventTypeNormal, "ThroughTheGivenBroadcaster", "")
	select {
	case reason := <-seen:
		if reason != "ThroughTheGivenBroadcaster" {
			t.Fatalf("the given broadcaster saw %q", reason)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the Event did not go through the broadcaster the options gave")
	}
}

// BenchmarkNewClusterHeap builds 500 clusters with controller-runtime's
// cluster.New and then with NewCluster (both with the shared lazy REST
// mapper, so that only the rest differs), and reports the heap each cluster
// holds before it starts (KB-heap/cluster, after two collections) and the
// ratio of NewCluster's to cluster.New's (heap-ratio), in the same run.
func BenchmarkNewClusterHeap(b *testing.B) {
	const n = 500
	cfg := fleet.Config(0)
	measure := func(b *testing.B, name string, newCluster func() (cluster.Cluster, error)) float64 {
		var perCluster float64
		b.Run(name, func(b *testing.B) {
			for range b.N {
				keep := make([]cluster.Cluster, 0, n)
				before := liveHeap()
				for range n {
					cl, err := newCluster()
					if err != nil {
						b.Fatal(err)
					}
					keep = append(keep, cl)
				}
				perCluster = float64(liveHeap()-before) / 1024 / n
				runtime.KeepAlive(keep)
			}
			b.ReportMetric(perCluster, "KB-heap/cluster")
		})
		return perCluster
	}
	plain := measure(b, "cluster.New", func() (cluster.Cluster, error) {
		return cluster.New(cfg)
	})
	light := measure(b, "NewCluster", func() (cluster.Cluster, error) { return build.NewCluster(cfg) })
	// As a fleet's members are: each with a token of its own, so each
	// with a shared mapper of its own.
	var distinct atomic.Int64
	measure(b, "NewCluster/distinct-tokens", func() (cluster.Cluster, error) {
		c := rest.CopyConfig(cfg)
		c.CertData, c.KeyData = nil, nil
		c.BearerToken = fmt.Sprintf("heap-token-%d", distinct.Add(1))
		return build.NewCluster(c)
	})
	b.Run("ratio", func(b *testing.B) { b.ReportMetric(light/plain, "heap-ratio") })
	fmt.Fprintf(b.Output(), "NewCluster %.1f KB, cluster.New %.1f KB per cluster\n", light, plain)
}

// liveHeap is the live heap after two collections.
func liveHeap() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
