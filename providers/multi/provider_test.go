package multi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	"github.com/mcruntime/multicluster-runtime/providers/namespace"
)

// namespaceProvider returns a namespace provider of fleet member i.
func namespaceProvider(t *testing.T, i int) *namespace.Provider {
	t.Helper()
	cl, err := cluster.New(fleet.Config(i))
	if err != nil {
		t.Fatal(err)
	}
	return namespace.New(cl)
}

// seedNamespace creates namespace ns on member i with a ConfigMap "cm" that
// names the member.
func seedNamespace(t *testing.T, i int, ns string) {
	t.Helper()
	c, err := client.New(fleet.Config(i), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm"}, Data: map[string]string{"member": fmt.Sprint(i), "color": "red"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
}

func TestPrefixedProvidersOverTwoAPIServers(t *testing.T) {
	const ns = "same-name"
	seedNamespace(t, 0, ns)
	seedNamespace(t, 1, ns)
	ctx, cancel := context.WithCancel(context.Background())

	p := New(Options{})
	if err := p.AddProvider("a", namespaceProvider(t, 0)); err != nil {
		t.Fatal(err)
	}
	if err := p.AddProvider("b", namespaceProvider(t, 1)); err != nil {
		t.Fatal(err)
	}
	if err := p.AddProvider("a", namespaceProvider(t, 1)); !errors.Is(err, ErrProviderExists) {
		t.Fatalf("duplicate prefix: %v", err)
	}
	if err := p.AddProvider("x#y", namespaceProvider(t, 1)); err == nil {
		t.Fatal("a prefix with the separator was accepted")
	}

	mgr, err := mcmanager.New(fleet.Config(0), p, mcmanager.Options{
		Metrics:    server.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	// An index registered before start reaches both providers and the one
	// added later.
	err = mgr.GetFieldIndexer().IndexField(ctx, &corev1.ConfigMap{}, "data.color", func(o client.Object) []string {
		return []string{o.(*corev1.ConfigMap).Data["color"]}
	})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	members := map[string]string{} // cluster -> member read through it
	err = mcbuilder.ControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Complete(mcreconcile.Func(
		func(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
			cl, err := mgr.GetCluster(ctx, req.ClusterName)
			if err != nil {
				return reconcile.Result{}, err
			}
			cm := &corev1.ConfigMap{}
			if err := cl.GetClient().Get(ctx, req.NamespacedName, cm); err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			mu.Lock()
			members[req.ClusterName] = cm.Data["member"]
			mu.Unlock()
			return reconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	read := func(name string) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		m, ok := members[name]
		return m, ok
	}
	want := map[string]string{"a#" + ns: "0", "b#" + ns: "1"}
	for name, member := range want {
		fleettest.Eventually(t, 30*time.Second, func() error {
			if got, ok := read(name); !ok || got != member {
				return fmt.Errorf("cluster %q: read member %q, want %q", name, got, member)
			}
			return nil
		})
	}
	for _, name := range []string{"a#" + ns, "b#" + ns} {
		checkIndex(t, ctx, p, name)
	}

	// Unknown prefixes and names without a prefix are not found.
	for _, name := range []string{"zz#" + ns, ns} {
		if _, err := p.Get(ctx, name); !errors.Is(err, multicluster.ErrClusterNotFound) {
			t.Errorf("Get(%q): %v, want ErrClusterNotFound", name, err)
		}
	}

	// A provider added after start engages its clusters, indexed.
	if err := p.AddProvider("c", namespaceProvider(t, 1)); err != nil {
		t.Fatal(err)
	}
	fleettest.Eventually(t, 30*time.Second, func() error {
		if got, ok := read("c#" + ns); !ok || got != "1" {
			return fmt.Errorf("late provider's cluster not reconciled (member %q)", got)
		}
		return nil
	})
	checkIndex(t, ctx, p, "c#"+ns)

	// Removing a provider disengages its clusters, and only its clusters.
	p.RemoveProvider("b")
	fleettest.Eventually(t, 30*time.Second, func() error {
		if _, err := mgr.GetCluster(ctx, "b#"+ns); !errors.Is(err, multicluster.ErrClusterNotFound) {
			return fmt.Errorf("manager still has b#%s: %v", ns, err)
		}
		if _, err := mgr.GetCluster(ctx, "b#default"); !errors.Is(err, multicluster.ErrClusterNotFound) {
			return fmt.Errorf("manager still has b#default: %v", err)
		}
		return nil
	})
	if _, err := p.Get(ctx, "b#"+ns); !errors.Is(err, multicluster.ErrClusterNotFound) {
		t.Errorf("removed provider still serves its cluster: %v", err)
	}
	for _, name := range []string{"a#" + ns, "c#" + ns} {
		if _, err := mgr.GetCluster(ctx, name); err != nil {
			t.Errorf("cluster %q lost when removing another provider: %v", name, err)
		}
	}
}

func checkIndex(t *testing.T, ctx context.Context, p *Provider, name string) {
	t.Helper()
	fleettest.Eventually(t, 10*time.Second, func() error {
		cl, err := p.Get(ctx, name)
		if err != nil {
			return err
		}
		list := &corev1.ConfigMapList{}
		if err := cl.GetClient().List(ctx, list, client.MatchingFields{"data.color": "red"}); err != nil {
			return err
		}
		if len(list.Items) != 1 {
			return fmt.Errorf("cluster %q: %d red ConfigMaps, want 1", name, len(list.Items))
		}
		return nil
	})
}

// countingProvider counts IndexField calls per field.
type countingProvider struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingProvider) Get(_ context.Context, name string) (cluster.Cluster, error) {
	return nil, fmt.Errorf("cluster %q: %w", name, multicluster.ErrClusterNotFound)
}

func (c *countingProvider) IndexField(_ context.Context, _ client.Object, field string, _ client.IndexerFunc) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[field]++
	return nil
}

func TestIndexFieldReachesEveryProviderExactlyOnce(t *testing.T) {
	p := New(Options{Separator: "/"})
	ctx := context.Background()
	extract := func(client.Object) []string { return nil }
	early, late := &countingProvider{}, &countingProvider{}
	if err := p.AddProvider("early", early); err != nil {
		t.Fatal(err)
	}
	if err := p.IndexField(ctx, &corev1.ConfigMap{}, "one", extract); err != nil {
		t.Fatal(err)
	}
	// Concurrent registrations race with adding a provider.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() { _ = p.IndexField(ctx, &corev1.ConfigMap{}, fmt.Sprint("f", i), extract) })
	}
	wg.Go(func() {
		if err := p.AddProvider("late", late); err != nil {
			t.Error(err)
		}
	})
	wg.Wait()
	for name, cp := range map[string]*countingProvider{"early": early, "late": late} {
		cp.mu.Lock()
		if len(cp.calls) != 21 {
			t.Errorf("provider %q got %d indexes, want 21", name, len(cp.calls))
		}
		for field, n := range cp.calls {
			if n != 1 {
				t.Errorf("provider %q got index %q %d times", name, field, n)
			}
		}
		cp.mu.Unlock()
	}
	if _, err := p.Get(ctx, "late/x"); !errors.Is(err, multicluster.ErrClusterNotFound) {
		t.Errorf("inner not-found error not wrapped: %v", err)
	}
}
