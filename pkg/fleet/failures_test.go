package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mccontroller "github.com/mcruntime/multicluster-runtime/pkg/controller"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	"github.com/mcruntime/multicluster-runtime/providers/single"
)

// fleetController watches ConfigMaps of provider clusters only.
func fleetController(t *testing.T, mgr mcmanager.Manager, name, ns string) *fleettest.Recorder {
	t.Helper()
	rec := &fleettest.Recorder{Namespace: ns}
	if err := mcbuilder.ControllerManagedBy(mgr).Named(name).
		For(&corev1.ConfigMap{}, mcbuilder.WithEngageWithLocalCluster(false), mcbuilder.WithEngageWithProviderClusters(true)).
		Complete(rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// running starts a cluster of member i as its provider would, until the test ends.
func running(t *testing.T, i int) cluster.Cluster {
	t.Helper()
	cl := testbed.NewCluster(t, members.Config(i))
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = cl.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-stopped })
	if !cl.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	return cl
}

// refuser is a runnable that refuses to engage one cluster name.
type refuser struct{ name string }

func (r *refuser) Start(ctx context.Context) error { <-ctx.Done(); return nil }
func (r *refuser) Engage(_ context.Context, name multicluster.ClusterName, _ cluster.Cluster) error {
	if name == r.name {
		return fmt.Errorf("refusing %q", name)
	}
	return nil
}

// An engagement that one runnable refuses leaves no controller watching the
// cluster the manager reports as not engaged.
func TestEngagementIsAllOrNothing(t *testing.T) {
	const ns = "all-or-nothing"
	for _, i := range []int{1, 2} {
		testbed.CreateNamespace(t, testbed.NewClient(t, members.Config(i)), ns)
	}
	mgr := fleettest.NewManager(t, members.Config(0), nil)
	rec := fleetController(t, mgr, "all-or-nothing", ns)
	if err := mgr.Add(&refuser{name: "refused"}); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)

	if err := mgr.Engage(context.Background(), "refused", running(t, 1)); err == nil {
		t.Fatal("engaging a cluster a runnable refuses succeeded")
	}
	if _, err := mgr.GetCluster(context.Background(), "refused"); !errors.Is(err, multicluster.ErrClusterNotFound) {
		t.Fatalf("GetCluster of the refused cluster: %v", err)
	}
	testbed.CreateConfigMap(t, testbed.NewClient(t, members.Config(1)), ns, "in-refused", nil)
	if err := mgr.Engage(context.Background(), "accepted", running(t, 2)); err != nil {
		t.Fatal(err)
	}
	testbed.CreateConfigMap(t, testbed.NewClient(t, members.Config(2)), ns, "barrier", nil)
	rec.WaitFor(t, 1, "accepted", ns, "barrier")
	// The refused cluster's object would have been listed long before the barrier.
	if n := rec.Count("refused", ns, "in-refused"); n != 0 {
		t.Fatalf("a controller reconciled %d requests of a cluster whose engagement failed", n)
	}
}

// Engaging the same instance again under a new context, then cancelling the
// old one, keeps the cluster engaged everywhere.
func TestSameInstanceEngagedAgainWithANewContext(t *testing.T) {
	const ns = "engaged-again"
	testbed.CreateNamespace(t, testbed.NewClient(t, members.Config(1)), ns)
	mgr := fleettest.NewManager(t, members.Config(0), nil)
	rec := fleetController(t, mgr, "engaged-again", ns)
	fleettest.RunManager(t, mgr)

	cl := running(t, 1)
	first, cancelFirst := context.WithCancel(context.Background())
	if err := mgr.Engage(first, "again", cl); err != nil {
		t.Fatal(err)
	}
	second, cancelSecond := context.WithCancel(context.Background())
	defer cancelSecond()
	if err := mgr.Engage(second, "again", cl); err != nil {
		t.Fatal(err)
	}
	cancelFirst()

	testbed.CreateConfigMap(t, testbed.NewClient(t, members.Config(1)), ns, "after", nil)
	rec.WaitFor(t, 1, "again", ns, "after")
	if _, err := mgr.GetCluster(context.Background(), "again"); err != nil {
		t.Fatalf("manager lost the cluster: %v", err)
	}
}

// dyingCluster's Start fails on demand, as a cluster whose cache dies.
type dyingCluster struct {
	cluster.Cluster
	kill <-chan struct{}
}

func (c *dyingCluster) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- c.Cluster.Start(ctx) }()
	select {
	case <-c.kill:
		cancel()
		<-errc
		return errors.New("cache died")
	case err := <-errc:
		return err
	}
}

// A cluster whose Start returns an error after engagement is disconnected,
// then built again and engaged.
func TestClusterWhoseStartFailsIsDisconnected(t *testing.T) {
	const ns = "dies"
	testbed.CreateNamespace(t, testbed.NewClient(t, members.Config(1)), ns)
	mgr := fleettest.NewManager(t, members.Config(0), nil)
	rec := fleetController(t, mgr, "dies", ns)
	fleettest.RunManager(t, mgr)
	eng := mgr.(mcmanager.FleetOwner).Fleet()

	kill := make(chan struct{})
	var builds atomic.Int32
	mgr.(fleet.Publisher).SetMember(fleet.Member{Name: "dies", Hash: "1", Build: func(context.Context) (cluster.Cluster, error) {
		cl, err := pkgclusters.NewCluster(members.Config(1))
		if err != nil {
			return nil, err
		}
		if builds.Add(1) == 1 {
			return &dyingCluster{Cluster: cl, kill: kill}, nil
		}
		return cl, nil
	}})
	testbed.CreateConfigMap(t, testbed.NewClient(t, members.Config(1)), ns, "before", nil)
	rec.WaitFor(t, 1, "dies", ns, "before")

	close(kill)
	fleettest.Eventually(t, 30*time.Second, func() error {
		if n := builds.Load(); n < 2 {
			return fmt.Errorf("built %d times", n)
		}
		if s, _ := eng.State("dies"); s != fleet.StateEngaged {
			return fmt.Errorf("state %s", s)
		}
		return nil
	})
	if got := testutil.ToFloat64(metrics.Transitions.WithLabelValues(string(fleet.StateEngaged), string(fleet.StateDisconnected))); got < 1 {
		t.Errorf("no engaged → disconnected transition counted")
	}
	testbed.CreateConfigMap(t, testbed.NewClient(t, members.Config(1)), ns, "after", nil)
	rec.WaitFor(t, 1, "dies", ns, "after")
}

// A watch that can never sync (its list is forbidden) fails that
// controller's engagement of that cluster, loudly, while other controllers
// in that cluster and other clusters go on.
func TestWatchThatCannotSyncFailsOnlyThatController(t *testing.T) {
	const ns = "cannot-sync"
	admin := testbed.NewClient(t, members.Config(1))
	testbed.CreateNamespace(t, admin, ns)
	testbed.CreateNamespace(t, testbed.NewClient(t, members.Config(2)), ns)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(admin.Create(context.Background(), &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "configmaps-only"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
	}))
	must(admin.Create(context.Background(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "configmaps-only"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "configmaps-only"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "configmaps-only"}},
	}))
	limited := members.Config(1)
	limited.Impersonate.UserName = "configmaps-only"

	p := newConfigProvider(map[multicluster.ClusterName]*rest.Config{"limited": limited, "full": members.Config(2)})
	mgr := fleettest.NewManager(t, members.Config(0), p)
	configMaps := fleetController(t, mgr, "configmaps", ns)
	secrets := &fleettest.Recorder{Namespace: ns}
	must(mcbuilder.ControllerManagedBy(mgr).Named("secrets").For(&corev1.Secret{}).
		WithOptions(mccontroller.Options{CacheSyncTimeout: 2 * time.Second}).Complete(secrets))
	failures := func() float64 { return testutil.ToFloat64(metrics.WatchFailures.WithLabelValues("secrets")) }
	before := failures()
	fleettest.RunManager(t, mgr)

	fleettest.Eventually(t, 30*time.Second, func() error {
		if failures() == before {
			return errors.New("no watch failure counted for the secrets controller")
		}
		return nil
	})
	testbed.CreateConfigMap(t, admin, ns, "still-watched", nil)
	configMaps.WaitFor(t, 1, "limited", ns, "still-watched")
	must(testbed.NewClient(t, members.Config(2)).Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "elsewhere"}}))
	secrets.WaitFor(t, 1, "full", ns, "elsewhere")
}

// blockingBuild builds member i's cluster once release is closed.
func blockingBuild(i int, release <-chan struct{}) func(context.Context) (cluster.Cluster, error) {
	return func(ctx context.Context) (cluster.Cluster, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return pkgclusters.NewCluster(members.Config(i))
	}
}

// A request fanned out from the hub to a member that is still joining waits
// for its engagement; one for a cluster nobody knows is dropped, counted.
func TestRequestsForAJoiningClusterWaitForIt(t *testing.T) {
	const ns = "fan-out"
	host := testbed.NewClient(t, members.Config(0))
	testbed.CreateNamespace(t, host, ns)
	testbed.CreateNamespace(t, testbed.NewClient(t, members.Config(1)), ns)
	mgr := fleettest.NewManager(t, members.Config(0), nil)
	rec := &fleettest.Recorder{Namespace: ns}
	toMembers := mchandler.EnqueueClusterRequestsFromMapFunc(func(_ context.Context, _ multicluster.ClusterName, obj client.Object) []mcreconcile.Request {
		key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
		return []mcreconcile.Request{
			{ClusterName: "joining", Request: reconcile.Request{NamespacedName: key}},
			{ClusterName: "nowhere", Request: reconcile.Request{NamespacedName: key}},
		}
	})
	if err := mcbuilder.ControllerManagedBy(mgr).Named("fan-out").
		Watches(&corev1.ConfigMap{}, toMembers, mcbuilder.WithEngageWithLocalCluster(true), mcbuilder.WithEngageWithProviderClusters(false)).
		Complete(rec); err != nil {
		t.Fatal(err)
	}
	dropped := func() float64 {
		return testutil.ToFloat64(metrics.DroppedRequests.WithLabelValues("fan-out", "cluster-not-engaged"))
	}
	before := dropped()
	fleettest.RunManager(t, mgr)

	release := make(chan struct{})
	mgr.(fleet.Publisher).SetMember(fleet.Member{Name: "joining", Hash: "1", Build: blockingBuild(1, release)})
	fleettest.Eventually(t, 0, func() error {
		if s, _ := mgr.(mcmanager.FleetOwner).Fleet().State("joining"); s != fleet.StateStarting {
			return fmt.Errorf("joining is %s", s)
		}
		return nil
	})
	testbed.CreateConfigMap(t, host, ns, "fan-me-out", nil)
	fleettest.Eventually(t, 0, func() error {
		if dropped() == before {
			return errors.New("request for an unknown cluster not counted as dropped")
		}
		return nil
	})
	if n := rec.Count("joining", ns, "fan-me-out"); n != 0 {
		t.Fatalf("request for a cluster still starting was reconciled %d times before it joined", n)
	}
	close(release)
	rec.WaitFor(t, 1, "joining", ns, "fan-me-out")
}

// A pre-built cluster handed to the single provider works whether or not the
// application starts it too (upstream's examples start it).
func TestSingleProviderWithAClusterTheApplicationRuns(t *testing.T) {
	const ns = "app-started"
	testbed.CreateNamespace(t, testbed.NewClient(t, members.Config(1)), ns)
	cl := running(t, 1)
	mgr := fleettest.NewManager(t, members.Config(0), single.New("only", cl))
	rec := fleetController(t, mgr, "app-started", ns)
	fleettest.RunManager(t, mgr)
	testbed.CreateConfigMap(t, testbed.NewClient(t, members.Config(1)), ns, "cm", nil)
	rec.WaitFor(t, 1, "only", ns, "cm")
}

// lazyProvider creates clusters when asked for them.
type lazyProvider struct {
	mu      sync.Mutex
	created map[string]cluster.Cluster
	t       *testing.T
}

func (p *lazyProvider) Get(_ context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if name != "on-demand" {
		return nil, fmt.Errorf("cluster %q: %w", name, multicluster.ErrClusterNotFound)
	}
	if p.created[name] == nil {
		p.created = map[string]cluster.Cluster{name: testbed.NewCluster(p.t, members.Config(1))}
	}
	return p.created[name], nil
}

func (p *lazyProvider) IndexField(context.Context, client.Object, string, client.IndexerFunc) error {
	return nil
}

// GetCluster asks the provider for a name the fleet does not know, so that
// providers creating clusters on demand work through the manager.
func TestGetClusterAsksTheProvider(t *testing.T) {
	p := &lazyProvider{t: t}
	mgr := fleettest.NewManager(t, members.Config(0), p)
	cl, err := mgr.GetCluster(context.Background(), "on-demand")
	if err != nil {
		t.Fatalf("GetCluster of a cluster the provider creates on demand: %v", err)
	}
	if want, _ := p.Get(context.Background(), "on-demand"); cl != want {
		t.Fatal("GetCluster returned another cluster than the provider's")
	}
	if _, err := mgr.GetCluster(context.Background(), "unknown"); !errors.Is(err, multicluster.ErrClusterNotFound) {
		t.Fatalf("GetCluster of an unknown name: %v", err)
	}
}
