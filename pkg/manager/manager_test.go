package manager_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mccontext "github.com/mcruntime/multicluster-runtime/pkg/context"
	mccontroller "github.com/mcruntime/multicluster-runtime/pkg/controller"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	clustersprovider "github.com/mcruntime/multicluster-runtime/providers/clusters"
)

// fleet: member 0 is the host, 1 and 2 are members.
var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	testbed.MustProvideAssets()
	fleettest.RunMain(m, 3, func(f *fleettest.Fleet) { fleet = f })
}

func TestGetClusterGetManagerAndClusterFromContext(t *testing.T) {
	ctx := context.Background()
	p := clustersprovider.New()
	mgr := fleettest.NewManager(t, fleet.Config(0), p)
	ns := testbed.Name("manager-api")
	for i := range 3 {
		testbed.CreateNamespace(t, testbed.NewClient(t, fleet.Config(i)), ns)
		testbed.CreateConfigMap(t, testbed.NewClient(t, fleet.Config(i)), ns, "who", map[string]string{"i": fmt.Sprint(i)})
	}

	// A single-cluster reconciler that finds its cluster in the context.
	type seen struct {
		cluster string
		data    string
	}
	var mu sync.Mutex
	var got []seen
	single := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		cl, err := mgr.ClusterFromContext(ctx)
		if err != nil {
			return reconcile.Result{}, err
		}
		name, _ := mccontext.ClusterFrom(ctx)
		cm := &corev1.ConfigMap{}
		if err := cl.GetClient().Get(ctx, req.NamespacedName, cm); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		mu.Lock()
		got = append(got, seen{name, cm.Data["i"]})
		mu.Unlock()
		return reconcile.Result{}, nil
	})
	if err := mcbuilder.ControllerManagedBy(mgr).Named(testbed.Name("from-context")).
		For(&corev1.ConfigMap{}, mcbuilder.WithEngageWithLocalCluster(true)).
		WithEventFilter(inNamespace(ns)).
		Complete(mccontext.ReconcilerWithClusterInContext(single)); err != nil {
		t.Fatal(err)
	}
	if err := p.Add(ctx, "one", testbed.NewCluster(t, fleet.Config(1))); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)

	host, err := mgr.GetCluster(ctx, mcmanager.LocalCluster)
	if err != nil || host != mgr.GetLocalManager() {
		t.Fatalf(`GetCluster("") = %v, %v; want the host manager`, host, err)
	}
	if _, err := mgr.GetCluster(ctx, "nope"); !errors.Is(err, multicluster.ErrClusterNotFound) || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("GetCluster(unknown) = %v; want an error naming the cluster and wrapping ErrClusterNotFound", err)
	}
	if _, err := mgr.ClusterFromContext(ctx); !errors.Is(err, mccontext.ErrNoCluster) {
		t.Fatalf("ClusterFromContext outside a reconciler = %v; want ErrNoCluster", err)
	}

	fleettest.Eventually(t, 0, func() error {
		scoped, err := mgr.GetManager(ctx, "one")
		if err != nil {
			return err
		}
		cm := &corev1.ConfigMap{}
		if err := scoped.GetAPIReader().Get(ctx, client.ObjectKey{Namespace: ns, Name: "who"}, cm); err != nil {
			return err
		}
		if cm.Data["i"] != "1" {
			t.Fatalf("GetManager(one) read member %s", cm.Data["i"])
		}
		return nil
	})

	fleettest.Eventually(t, 0, func() error {
		mu.Lock()
		defer mu.Unlock()
		want := map[seen]bool{{"", "0"}: true, {"one", "1"}: true}
		for _, s := range got {
			delete(want, s)
		}
		if len(want) > 0 {
			return fmt.Errorf("reconciles so far %v, missing %v", got, want)
		}
		return nil
	})
}

// Without a provider, the same controller code runs against the host alone.
func TestNilProviderRunsAgainstTheHost(t *testing.T) {
	mgr := fleettest.NewManager(t, fleet.Config(0), nil)
	if mgr.GetProvider() != nil {
		t.Fatal("provider should be nil")
	}
	ns := testbed.Name("nil-provider")
	testbed.CreateNamespace(t, testbed.NewClient(t, fleet.Config(0)), ns)
	rec := &fleettest.Recorder{Namespace: ns}
	if err := mcbuilder.ControllerManagedBy(mgr).Named(ns).For(&corev1.ConfigMap{}).Complete(rec); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)
	testbed.CreateConfigMap(t, testbed.NewClient(t, fleet.Config(0)), ns, "cm", nil)
	rec.WaitFor(t, 1, "", ns, "cm")
}

// A member that cannot be reached neither delays the others nor their
// reconciles; its own engagement fails within the configured bound, with an
// error that names it.
func TestUnreachableClusterIsIsolated(t *testing.T) {
	dead := fleettest.New(t, 1)
	deadCfg := dead.Config(0)
	if err := dead.StopMember(0); err != nil {
		t.Fatal(err)
	}
	// An endpoint that accepts connections and never answers: worse than a
	// refused connection, because nothing fails on its own.
	hanging := testbed.HangingEndpoint(t)
	hangingCfg := rest.CopyConfig(deadCfg)
	hangingCfg.Host = "https://" + hanging

	ns := testbed.Name("isolation")
	p := clustersprovider.New()
	mgr := fleettest.NewManager(t, fleet.Config(0), p)
	rec := &fleettest.Recorder{Namespace: ns}
	const bound = 3 * time.Second
	if err := mcbuilder.ControllerManagedBy(mgr).Named(ns).For(&corev1.ConfigMap{}).
		WithOptions(mccontroller.Options{CacheSyncTimeout: bound}).Complete(rec); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)
	ctx := context.Background()
	// Wait until the provider and the controller run, so that Add engages at
	// once and reports what the controller makes of the cluster: a cluster
	// engaged before its controllers start can only be logged when it fails.
	testbed.CreateNamespace(t, testbed.NewClient(t, fleet.Config(1)), ns)
	testbed.CreateConfigMap(t, testbed.NewClient(t, fleet.Config(1)), ns, "probe", nil)
	if err := p.Add(ctx, "probe", testbed.NewCluster(t, fleet.Config(1))); err != nil {
		t.Fatal(err)
	}
	rec.WaitFor(t, 1, "probe", ns, "probe")
	p.Remove("probe")

	type result struct {
		name string
		err  error
		took time.Duration
	}
	results := make(chan result, 4)
	add := func(name string, cfg *rest.Config) {
		cl := testbed.NewCluster(t, cfg)
		start := time.Now()
		go func() {
			err := p.Add(ctx, name, cl)
			results <- result{name, err, time.Since(start)}
		}()
	}
	add("dead", deadCfg)
	add("hanging", hangingCfg)
	testbed.CreateNamespace(t, testbed.NewClient(t, fleet.Config(2)), ns)
	add("healthy-1", fleet.Config(1))
	add("healthy-2", fleet.Config(2))

	testbed.CreateConfigMap(t, testbed.NewClient(t, fleet.Config(1)), ns, "cm", nil)
	testbed.CreateConfigMap(t, testbed.NewClient(t, fleet.Config(2)), ns, "cm", nil)
	rec.WaitFor(t, 1, "healthy-1", ns, "cm")
	rec.WaitFor(t, 1, "healthy-2", ns, "cm")

	for range 4 {
		r := <-results
		switch r.name {
		case "healthy-1", "healthy-2":
			if r.err != nil {
				t.Errorf("%s: %v", r.name, r.err)
			}
		default:
			if r.err == nil {
				t.Errorf("%s engaged, want an error", r.name)
				continue
			}
			if !strings.Contains(r.err.Error(), `"`+r.name+`"`) {
				t.Errorf("%s: error does not name the cluster: %v", r.name, r.err)
			}
			if r.took > bound+10*time.Second {
				t.Errorf("%s: failing took %s, bound is %s", r.name, r.took, bound)
			}
			t.Logf("%s failed after %s: %v", r.name, r.took.Round(time.Millisecond), r.err)
		}
	}
	for _, name := range []string{"dead", "hanging"} {
		if _, err := mgr.GetCluster(ctx, name); !errors.Is(err, multicluster.ErrClusterNotFound) {
			t.Errorf("%s: still engaged after failing: %v", name, err)
		}
	}
}

func inNamespace(ns string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == ns })
}

// A cluster engaged before the controller starts, and unreachable when it
// does, is watched once it is back: the controller keeps trying.
func TestClusterUnreachableAtControllerStartIsWatchedOnceBack(t *testing.T) {
	ns := testbed.Name("comes-back")
	member := testbed.NewClient(t, fleet.Config(2))
	testbed.CreateNamespace(t, member, ns)
	testbed.CreateConfigMap(t, member, ns, "cm", nil)

	cfg, proxy := testbed.Proxied(t, fleet.Config(2))
	proxy.SetUp(false)

	mgr := fleettest.NewManager(t, fleet.Config(0), nil) // clusters are engaged by hand
	rec := &fleettest.Recorder{Namespace: ns}
	const bound = time.Second
	if err := mcbuilder.ControllerManagedBy(mgr).Named(ns).
		For(&corev1.ConfigMap{}, mcbuilder.WithEngageWithLocalCluster(false), mcbuilder.WithEngageWithProviderClusters(true)).
		WithOptions(mccontroller.Options{CacheSyncTimeout: bound}).
		Complete(rec); err != nil {
		t.Fatal(err)
	}
	cl := testbed.NewCluster(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = cl.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-stopped })
	if err := mgr.Engage(ctx, "comes-back", cl); err != nil {
		t.Fatalf("engaging before the controller runs: %v", err)
	}

	fleettest.RunManager(t, mgr)
	// client-go retries a refused request about once a second; three
	// connections mean the first attempt outlived its bound and failed.
	fleettest.Eventually(t, 0, func() error {
		if n := proxy.Attempts(); n < 3 {
			return fmt.Errorf("%d connections to the cluster so far", n)
		}
		return nil
	})
	proxy.SetUp(true)
	rec.WaitFor(t, 1, "comes-back", ns, "cm")
}
