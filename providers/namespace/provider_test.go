package namespace

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

func TestUniformControllerAcrossNamespaces(t *testing.T) {
	c := directClient(t)
	ctx := context.Background()
	initial := names("uniform", 3)
	createNamespaces(t, c, initial, "cm")
	env := startManager(t, nil, nil)

	for _, ns := range initial {
		fleettest.Eventually(t, 30*time.Second, func() error {
			if !env.rec.has(request(ns, "cm")) {
				return fmt.Errorf("cluster %q: cm not reconciled", ns)
			}
			return nil
		})
	}
	// Each request names its cluster and namespace "default", never the backing one.
	env.rec.mu.Lock()
	for req := range env.rec.seen {
		if req.Namespace != VirtualNamespace {
			t.Errorf("request %s: namespace %q, want %q", req, req.Namespace, VirtualNamespace)
		}
	}
	env.rec.mu.Unlock()

	// A new namespace engages a new cluster.
	createNamespaces(t, c, []string{"uniform-late"}, "late")
	fleettest.Eventually(t, 30*time.Second, func() error {
		if !env.rec.has(request("uniform-late", "late")) {
			return errors.New("late namespace not reconciled")
		}
		return nil
	})
	if _, err := env.mgr.GetCluster(ctx, "uniform-late"); err != nil {
		t.Fatalf("late cluster not engaged with the manager: %v", err)
	}
	// A handler on a cluster-scoped (shared) informer, registered through the
	// virtual cluster, must go when the cluster goes.
	late, err := env.p.Get(ctx, "uniform-late")
	if err != nil {
		t.Fatal(err)
	}
	nsInformer, err := late.GetCache().GetInformer(ctx, &corev1.Namespace{})
	if err != nil {
		t.Fatal(err)
	}
	var sawAfter atomic.Int32 // Namespace "uniform-after", created once the cluster is gone
	if _, err := nsInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if obj.(*corev1.Namespace).Name == "uniform-after" {
			sawAfter.Add(1)
		}
	}}); err != nil {
		t.Fatal(err)
	}
	scoped := late.(*virtualCluster)

	// Deleting it disengages it (envtest has no namespace controller: the
	// Namespace stays terminating, which is enough).
	if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "uniform-late"}}); err != nil {
		t.Fatal(err)
	}
	fleettest.Eventually(t, 30*time.Second, func() error {
		if _, err := env.mgr.GetCluster(ctx, "uniform-late"); !errors.Is(err, multicluster.ErrClusterNotFound) {
			return fmt.Errorf("manager still has the cluster: err=%v", err)
		}
		if _, err := env.p.Get(ctx, "uniform-late"); !errors.Is(err, multicluster.ErrClusterNotFound) {
			return fmt.Errorf("provider still has the cluster: err=%v", err)
		}
		return nil
	})
	// Its handlers are gone from the shared informer.
	fleettest.Eventually(t, 10*time.Second, func() error {
		for k, d := range env.p.dispatcherSnapshot() {
			if d.handlersFor("uniform-late") != nil {
				return fmt.Errorf("%s still dispatches to the disengaged namespace", k.gvk)
			}
		}
		return nil
	})
	fleettest.Eventually(t, 10*time.Second, func() error {
		scoped.mu.Lock()
		defer scoped.mu.Unlock()
		if len(scoped.regs) != 0 {
			return fmt.Errorf("%d handlers left on the shared Namespace informer", len(scoped.regs))
		}
		return nil
	})
	// And the shared informer no longer calls it: a Namespace created now
	// engages (the provider's handler on that informer saw it), unseen by it.
	createNamespaces(t, c, []string{"uniform-after"})
	fleettest.Eventually(t, 30*time.Second, func() error { _, err := env.mgr.GetCluster(ctx, "uniform-after"); return err })
	if n := sawAfter.Load(); n != 0 {
		t.Errorf("a handler of the disengaged cluster saw %d Namespace events after it left", n)
	}
	// The others still work.
	if _, err := env.p.Get(ctx, initial[0]); err != nil {
		t.Fatal(err)
	}
}

func TestIndexServesEachVirtualCluster(t *testing.T) {
	c := directClient(t)
	ctx := context.Background()
	nss := names("index", 2)
	createNamespaces(t, c, nss)
	for _, ns := range nss {
		for i, v := range []string{"red", "red", "blue"} {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"color": v}}
			if err := c.Create(ctx, cm); err != nil {
				t.Fatal(err)
			}
		}
	}
	env := startManager(t, nil, func(mgr mcmanager.Manager) {
		err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.ConfigMap{}, "data.color", func(o client.Object) []string {
			return []string{o.(*corev1.ConfigMap).Data["color"]}
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	for _, ns := range nss {
		var vc interface{ GetClient() client.Client }
		fleettest.Eventually(t, 30*time.Second, func() (err error) {
			vc, err = env.mgr.GetCluster(ctx, ns)
			return err
		})
		fleettest.Eventually(t, 10*time.Second, func() error {
			list := &corev1.ConfigMapList{}
			if err := vc.GetClient().List(ctx, list, client.MatchingFields{"data.color": "red"}); err != nil {
				return err
			}
			if len(list.Items) != 2 {
				return fmt.Errorf("cluster %q: %d red ConfigMaps, want 2", ns, len(list.Items))
			}
			for _, cm := range list.Items {
				if cm.Namespace != VirtualNamespace {
					return fmt.Errorf("cluster %q: item in namespace %q", ns, cm.Namespace)
				}
			}
			return nil
		})
	}
	// Registering the index again through a virtual cluster does not register
	// it twice on the shared cache (which would fail with a conflict).
	vc, err := env.p.Get(ctx, nss[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := vc.GetFieldIndexer().IndexField(ctx, &corev1.ConfigMap{}, "data.color", func(client.Object) []string { return nil }); err != nil {
		t.Fatalf("re-registering an index: %v", err)
	}
}

func TestEventsLandInBackingNamespace(t *testing.T) {
	c := directClient(t)
	ctx := context.Background()
	createNamespaces(t, c, []string{"events"}, "subject")
	env := startManager(t, nil, nil)
	var vc interface {
		GetClient() client.Client
	}
	fleettest.Eventually(t, 30*time.Second, func() (err error) { vc, err = env.p.Get(ctx, "events"); return err })
	cl, _ := env.p.Get(ctx, "events")
	cm := &corev1.ConfigMap{}
	fleettest.Eventually(t, 10*time.Second, func() error {
		return vc.GetClient().Get(ctx, client.ObjectKey{Namespace: VirtualNamespace, Name: "subject"}, cm)
	})
	//lint:ignore SA1019 the old events API is part of cluster.Cluster and must work.
	cl.GetEventRecorderFor("ns-test").Event(cm, corev1.EventTypeNormal, "Legacy", "recorded through the virtual cluster")
	cl.GetEventRecorder("ns-test").Eventf(cm, nil, corev1.EventTypeNormal, "Modern", "Test", "recorded through %s", "events.k8s.io")
	fleettest.Eventually(t, 30*time.Second, func() error {
		list := &corev1.EventList{}
		if err := c.List(ctx, list, client.InNamespace("events")); err != nil {
			return err
		}
		got := map[string]bool{}
		for _, e := range list.Items {
			if e.InvolvedObject.Namespace != "events" || e.InvolvedObject.Name != "subject" {
				return fmt.Errorf("event %s about %s/%s", e.Name, e.InvolvedObject.Namespace, e.InvolvedObject.Name)
			}
			got[e.Reason] = true
		}
		if !got["Legacy"] || !got["Modern"] {
			return fmt.Errorf("events in the backing namespace: %v", got)
		}
		return nil
	})
	// Nothing landed in the real "default" namespace.
	list := &corev1.EventList{}
	if err := c.List(ctx, list, client.InNamespace(VirtualNamespace)); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.InvolvedObject.Name == "subject" {
			t.Errorf("event %s landed in the real default namespace", e.Name)
		}
	}
}

// watchCounter counts WATCH requests per path.
type watchCounter struct {
	mu      sync.Mutex
	watches map[string]int
	next    http.RoundTripper
}

func (w *watchCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Query().Get("watch") == "true" {
		w.mu.Lock()
		w.watches[req.URL.Path]++
		w.mu.Unlock()
	}
	return w.next.RoundTrip(req)
}

func (w *watchCounter) snapshot() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for k, v := range w.watches {
		out[k] = v
	}
	return out
}

func TestOneInformerPerTypeFor50Namespaces(t *testing.T) {
	c := directClient(t)
	nss := names("shared", 50)
	createNamespaces(t, c, nss, "cm")
	counter := &watchCounter{watches: map[string]int{}}
	cfg := fleet.Config(0)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
	env := startManager(t, cfg, nil)
	for _, ns := range nss {
		fleettest.Eventually(t, 60*time.Second, func() error {
			if !env.rec.has(request(ns, "cm")) {
				return fmt.Errorf("cluster %q not reconciled", ns)
			}
			return nil
		})
	}
	watches := counter.snapshot()
	if watches["/api/v1/configmaps"] != 1 {
		t.Errorf("ConfigMap watches on the API server: %d, want exactly 1 (all: %v)", watches["/api/v1/configmaps"], watches)
	}
	for path, n := range watches {
		if strings.HasPrefix(path, "/api/v1/namespaces/") {
			t.Errorf("per-namespace watch %s (%d)", path, n)
		}
		if n != 1 {
			t.Errorf("%d watches on %s, want 1", n, path)
		}
	}
	infs := env.p.informers()
	if len(infs) != 1 {
		t.Errorf("shared informers with dispatchers: %v, want only ConfigMaps", infs)
	}
	for gvk, n := range infs {
		if n < len(nss) {
			t.Errorf("%s dispatches to %d namespaces, want at least %d", gvk, n, len(nss))
		}
	}
	t.Logf("watches: %v; dispatchers: %v", watches, infs)
	_ = rest.CopyConfig
}

func TestDisengageLeavesNothingBehind(t *testing.T) {
	c := directClient(t)
	ctx := context.Background()
	env := startManager(t, nil, nil)
	// Warm up: engage the existing namespaces and open the direct client's
	// connection before taking the baseline.
	if err := c.List(ctx, &corev1.NamespaceList{}); err != nil {
		t.Fatal(err)
	}
	fleettest.Eventually(t, 30*time.Second, func() error {
		if _, err := env.p.Get(ctx, "default"); err != nil {
			return err
		}
		return nil
	})
	baseline := stableGoroutines()
	engagedBefore := len(env.p.ClusterNames())

	cycle := names("cycle", 20)
	createNamespaces(t, c, cycle, "cm")
	for _, ns := range cycle {
		fleettest.Eventually(t, 30*time.Second, func() error {
			if !env.rec.has(request(ns, "cm")) {
				return fmt.Errorf("cluster %q not reconciled", ns)
			}
			return nil
		})
	}
	// One goroutine per virtual cluster (its Start, run by pkg/clusters).
	if grown := stableGoroutines() - baseline; grown < len(cycle) || grown > len(cycle)+2 {
		t.Errorf("%d engaged clusters added %d goroutines, want %d (one each)", len(cycle), grown, len(cycle))
	} else {
		t.Logf("%d engaged clusters added %d goroutines", len(cycle), grown)
	}
	for _, ns := range cycle {
		if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	fleettest.Eventually(t, 30*time.Second, func() error {
		if n := len(env.p.ClusterNames()); n != engagedBefore {
			return fmt.Errorf("%d clusters engaged, want %d", n, engagedBefore)
		}
		return nil
	})
	fleettest.Eventually(t, 10*time.Second, func() error {
		if g := runtime.NumGoroutine(); g > baseline {
			return fmt.Errorf("%d goroutines after disengaging, baseline %d", g, baseline)
		}
		for _, ns := range cycle {
			for k, d := range env.p.dispatcherSnapshot() {
				if d.handlersFor(ns) != nil {
					return fmt.Errorf("%s still dispatches to %q", k.gvk, ns)
				}
			}
		}
		return nil
	})
}

// stableGoroutines returns the goroutine count once it stops changing.
func stableGoroutines() int {
	last, since := runtime.NumGoroutine(), time.Now()
	for time.Since(since) < 300*time.Millisecond {
		time.Sleep(20 * time.Millisecond)
		if g := runtime.NumGoroutine(); g != last {
			last, since = g, time.Now()
		}
	}
	return last
}

// A namespace provider over the host manager's own cache: an index registered
// through the Multi-Cluster Manager lands once on that cache and serves the
// host and every virtual cluster.
func TestIndexOverTheHostManagersCache(t *testing.T) {
	c := directClient(t)
	ctx := context.Background()
	nss := names("hostindex", 2)
	createNamespaces(t, c, nss)
	for _, ns := range nss {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm"}, Data: map[string]string{"shade": "teal"}}
		if err := c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	host, err := manager.New(fleet.Config(0), manager.Options{Metrics: server.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := mcmanager.WithMultiCluster(host, New(host))
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.ConfigMap{}, "data.shade", func(o client.Object) []string {
		return []string{o.(*corev1.ConfigMap).Data["shade"]}
	}); err != nil {
		t.Fatalf("indexing through the manager: %v", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	fleettest.Eventually(t, 30*time.Second, func() error {
		list := &corev1.ConfigMapList{}
		if err := host.GetClient().List(ctx, list, client.MatchingFields{"data.shade": "teal"}); err != nil {
			return err
		}
		if len(list.Items) < len(nss) {
			return fmt.Errorf("host: %d teal ConfigMaps, want at least %d", len(list.Items), len(nss))
		}
		return nil
	})
	for _, ns := range nss {
		fleettest.Eventually(t, 30*time.Second, func() error {
			vc, err := mgr.GetCluster(ctx, ns)
			if err != nil {
				return err
			}
			list := &corev1.ConfigMapList{}
			if err := vc.GetClient().List(ctx, list, client.MatchingFields{"data.shade": "teal"}); err != nil {
				return err
			}
			if len(list.Items) != 1 {
				return fmt.Errorf("cluster %q: %d teal ConfigMaps, want 1", ns, len(list.Items))
			}
			return nil
		})
	}
}

// A shared cluster that the application starts itself (upstream's examples
// do) works as well as one the provider starts.
func TestSharedClusterTheApplicationRuns(t *testing.T) {
	createNamespaces(t, directClient(t), []string{"app-runs"}, "cm")
	cl := testbed.NewCluster(t, fleet.Config(0))
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = cl.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-stopped })

	mgr := fleettest.NewManager(t, fleet.Config(0), New(cl))
	rec := newRecorder()
	if err := mcbuilder.ControllerManagedBy(mgr).Named("app-runs").For(&corev1.ConfigMap{}).Complete(rec); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)
	fleettest.Eventually(t, 30*time.Second, func() error {
		if !rec.has(request("app-runs", "cm")) {
			return errors.New("cm of a namespace not reconciled with an application-run shared cluster")
		}
		return nil
	})
}
