package clusters_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/clusters"
	"github.com/mcruntime/multicluster-runtime/providers/nop"
	"github.com/mcruntime/multicluster-runtime/providers/single"
)

// member 0 is the host, member 1 the cluster the providers serve.
var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	testbed.MustProvideAssets()
	fleettest.RunMain(m, 2, func(f *fleettest.Fleet) { fleet = f })
}

func notEngaged(t *testing.T, get func() error, name string) {
	t.Helper()
	fleettest.Eventually(t, 0, func() error {
		if err := get(); !errors.Is(err, multicluster.ErrClusterNotFound) {
			return fmt.Errorf("%s: want ErrClusterNotFound, got %v", name, err)
		}
		return nil
	})
}

// Clusters added before and after the manager starts are engaged; removing
// one, or ending the context it was added with, disengages it.
func TestClustersProviderEngagesAndRemoves(t *testing.T) {
	ns := testbed.Name("clusters-provider")
	member := testbed.NewClient(t, fleet.Config(1))
	testbed.CreateNamespace(t, member, ns)
	testbed.CreateConfigMap(t, member, ns, "cm", nil)

	p := clusters.New()
	mgr := fleettest.NewManager(t, fleet.Config(0), p)
	rec := &fleettest.Recorder{Namespace: ns}
	if err := mcbuilder.ControllerManagedBy(mgr).Named(ns).For(&corev1.ConfigMap{}).Complete(rec); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Add(ctx, "early", testbed.NewCluster(t, fleet.Config(1))); err != nil {
		t.Fatal(err)
	}
	if err := p.Add(ctx, "", testbed.NewCluster(t, fleet.Config(1))); err == nil {
		t.Fatal(`Add("") succeeded; the name is the host's`)
	}
	fleettest.RunManager(t, mgr)
	rec.WaitFor(t, 1, "early", ns, "cm")

	shortCtx, endShort := context.WithCancel(ctx)
	if err := p.Add(shortCtx, "late", testbed.NewCluster(t, fleet.Config(1))); err != nil {
		t.Fatal(err)
	}
	rec.WaitFor(t, 1, "late", ns, "cm")
	if got := fmt.Sprint(p.ClusterNames()); got != "[early late]" {
		t.Fatalf("ClusterNames = %s", got)
	}

	p.Remove("early")
	notEngaged(t, func() error { _, err := mgr.GetCluster(ctx, "early"); return err }, "early")
	notEngaged(t, func() error { _, err := p.Get(ctx, "early"); return err }, "early in the provider")

	endShort()
	notEngaged(t, func() error { _, err := mgr.GetCluster(ctx, "late"); return err }, "late")
}

// The single provider engages its one cluster on start, under its name.
func TestSingleProviderEngagesOnStart(t *testing.T) {
	ns := testbed.Name("single-provider")
	member := testbed.NewClient(t, fleet.Config(1))
	testbed.CreateNamespace(t, member, ns)
	testbed.CreateConfigMap(t, member, ns, "cm", nil)

	p := single.New("only", testbed.NewCluster(t, fleet.Config(1)))
	mgr := fleettest.NewManager(t, fleet.Config(0), p)
	rec := &fleettest.Recorder{Namespace: ns}
	if err := mcbuilder.ControllerManagedBy(mgr).Named(ns).For(&corev1.ConfigMap{}).Complete(rec); err != nil {
		t.Fatal(err)
	}
	stop := fleettest.RunManager(t, mgr)
	rec.WaitFor(t, 1, "only", ns, "cm")
	if _, err := p.Get(context.Background(), "other"); !errors.Is(err, multicluster.ErrClusterNotFound) {
		t.Fatalf("Get(other) = %v, want ErrClusterNotFound", err)
	}
	stop()
	notEngaged(t, func() error { _, err := p.Get(context.Background(), "only"); return err }, "only after stop")
}

// The nop provider never has clusters; a controller on it still runs against
// the host when asked to.
func TestNopProviderHasNoClusters(t *testing.T) {
	p := nop.New()
	if _, err := p.Get(context.Background(), "any"); !errors.Is(err, multicluster.ErrClusterNotFound) {
		t.Fatalf("Get = %v, want ErrClusterNotFound", err)
	}
	ns := testbed.Name("nop-provider")
	host := testbed.NewClient(t, fleet.Config(0))
	testbed.CreateNamespace(t, host, ns)
	mgr := fleettest.NewManager(t, fleet.Config(0), p)
	rec := &fleettest.Recorder{Namespace: ns}
	if err := mcbuilder.ControllerManagedBy(mgr).Named(ns).
		For(&corev1.ConfigMap{}, mcbuilder.WithEngageWithLocalCluster(true)).Complete(rec); err != nil {
		t.Fatal(err)
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.ConfigMap{}, "nop", func(client.Object) []string { return nil }); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)
	testbed.CreateConfigMap(t, host, ns, "cm", nil)
	rec.WaitFor(t, 1, "", ns, "cm")
}

// The providers have listed once the clusters added before the manager
// started are published: the manager's readiness waits for that, then for
// the clusters themselves.
func TestListedOncePublishedAtStart(t *testing.T) {
	early := clusters.New()
	if err := early.Add(context.Background(), "listed-early", testbed.NewCluster(t, fleet.Config(1))); err != nil {
		t.Fatal(err)
	}
	one := single.New("listed-single", testbed.NewCluster(t, fleet.Config(1)))
	for name, p := range map[string]interface {
		multicluster.Provider
		multicluster.ListingProvider
	}{"listed-early": early, "listed-single": one} {
		if isListed(p.Listed()) {
			t.Fatalf("%s: listed before the provider started", name)
		}
		mgr := fleettest.NewManager(t, fleet.Config(0), p)
		fleettest.RunManager(t, mgr)
		engine := mgr.(mcmanager.FleetOwner).Fleet()
		fleettest.Eventually(t, 0, func() error {
			if !isListed(p.Listed()) {
				return fmt.Errorf("%s: not listed", name)
			}
			return nil
		})
		if _, known := engine.State(name); !known {
			t.Fatalf("listed before %s was published", name)
		}
	}
}

func isListed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
