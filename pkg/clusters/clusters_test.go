package clusters_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	testbed.MustProvideAssets()
	// A stopped metadata-only informer (TestNewClusterCachesNoFieldManagement)
	// leaves apimachinery's watch.Filter goroutine blocked on a send: an
	// upstream leak (filter.go has no stop path), not one of ours.
	fleettest.RunMain(m, 2, func(f *fleettest.Fleet) { fleet = f },
		goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/watch.(*filteredWatch).loop"))
}

// engagements records what an Aware saw.
type engagements struct {
	mu     sync.Mutex
	active map[string]cluster.Cluster
	total  atomic.Int32
}

func (e *engagements) Engage(ctx context.Context, name string, cl cluster.Cluster) error {
	e.mu.Lock()
	if e.active == nil {
		e.active = map[string]cluster.Cluster{}
	}
	e.active[name] = cl
	e.mu.Unlock()
	e.total.Add(1)
	context.AfterFunc(ctx, func() {
		e.mu.Lock()
		if e.active[name] == cl {
			delete(e.active, name)
		}
		e.mu.Unlock()
	})
	return nil
}

func (e *engagements) get(name string) cluster.Cluster {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.active[name]
}

func TestAddGetRemove(t *testing.T) {
	c := clusters.New[cluster.Cluster]()
	aware := &engagements{}
	ctx := t.Context()
	a := testbed.NewCluster(t, fleet.Config(0))
	if err := c.Add(ctx, "a", a, aware); err != nil {
		t.Fatal(err)
	}
	if aware.get("a") != a {
		t.Fatal("Add returned before engaging")
	}
	if err := c.Add(ctx, "a", testbed.NewCluster(t, fleet.Config(0)), aware); !errors.Is(err, clusters.ErrClusterExists) {
		t.Fatalf("second Add = %v, want ErrClusterExists", err)
	}
	if got, err := c.Get(ctx, "a"); err != nil || got != a {
		t.Fatalf("Get(a) = %v, %v", got, err)
	}
	if _, err := c.Get(ctx, "b"); !errors.Is(err, multicluster.ErrClusterNotFound) {
		t.Fatalf("Get(b) = %v, want ErrClusterNotFound", err)
	}
	b := testbed.NewCluster(t, fleet.Config(1))
	if err := c.Add(ctx, "b", b, aware); err != nil {
		t.Fatal(err)
	}
	if names := c.ClusterNames(); fmt.Sprint(names) != "[a b]" {
		t.Fatalf("ClusterNames = %v", names)
	}
	c.Remove("a")
	if _, err := c.Get(ctx, "a"); !errors.Is(err, multicluster.ErrClusterNotFound) {
		t.Fatalf("Get after Remove = %v", err)
	}
	fleettest.Eventually(t, 0, func() error {
		if aware.get("a") != nil {
			return errors.New("a still engaged")
		}
		return nil
	})
	c.Remove("a") // removing twice is harmless
	// When the context an entry was added with ends, the cluster goes too.
	bctx, cancel := context.WithCancel(ctx)
	c2 := testbed.NewCluster(t, fleet.Config(1))
	if err := c.Add(bctx, "short", c2, aware); err != nil {
		t.Fatal(err)
	}
	cancel()
	fleettest.Eventually(t, 0, func() error {
		if _, err := c.Get(ctx, "short"); err == nil {
			return errors.New("short-lived cluster still present")
		}
		return nil
	})
}

// Indexes registered before a cluster is added are in place before its cache
// starts; indexes registered later reach clusters already present. Each
// cluster gets each index once (a second registration of the same index on a
// cache fails, so a double application would surface as an error).
func TestIndexesBeforeAndAfterAdd(t *testing.T) {
	c := clusters.New[cluster.Cluster]()
	ctx := t.Context()
	byData := func(field string) client.IndexerFunc {
		return func(o client.Object) []string { return []string{o.(*corev1.ConfigMap).Data[field]} }
	}
	if err := c.IndexField(ctx, &corev1.ConfigMap{}, "data.early", byData("early")); err != nil {
		t.Fatal(err)
	}
	ns := "clusters-index"
	testbed.CreateNamespace(t, testbed.NewClient(t, fleet.Config(0)), ns)
	testbed.CreateConfigMap(t, testbed.NewClient(t, fleet.Config(0)), ns, "cm", map[string]string{"early": "x", "late": "y"})

	cl := testbed.NewCluster(t, fleet.Config(0))
	if err := c.Add(ctx, "a", cl, &engagements{}); err != nil {
		t.Fatal(err)
	}
	// The cache synced its ConfigMap informer before Add returned: the early
	// index answers at once, without polling.
	list := &corev1.ConfigMapList{}
	if err := cl.GetCache().List(ctx, list, client.InNamespace(ns), client.MatchingFields{"data.early": "x"}); err != nil || len(list.Items) != 1 {
		t.Fatalf("early index: %d items, %v", len(list.Items), err)
	}
	if err := c.IndexField(ctx, &corev1.ConfigMap{}, "data.late", byData("late")); err != nil {
		t.Fatal(err)
	}
	if err := cl.GetCache().List(ctx, list, client.InNamespace(ns), client.MatchingFields{"data.late": "y"}); err != nil || len(list.Items) != 1 {
		t.Fatalf("late index: %d items, %v", len(list.Items), err)
	}
}

// A replaced cluster's teardown never removes its replacement; a replacement
// that fails keeps the old cluster engaged. One Aware throughout: Clusters
// binds its first call's.
func TestAddOrReplace(t *testing.T) {
	c := clusters.New[cluster.Cluster]()
	aware := &choosy{}
	ctx := t.Context()
	old := testbed.NewCluster(t, fleet.Config(0))
	if err := c.AddOrReplace(ctx, "x", old, aware); err != nil {
		t.Fatal(err)
	}
	if err := c.AddOrReplace(ctx, "x", old, aware); err != nil || aware.total.Load() != 1 {
		t.Fatalf("re-adding the same instance: err=%v engagements=%d, want no new engagement", err, aware.total.Load())
	}
	newer := testbed.NewCluster(t, fleet.Config(1))
	if err := c.AddOrReplace(ctx, "x", newer, aware); err != nil {
		t.Fatal(err)
	}
	// The old cluster's life ends with the replacement; its teardown runs,
	// and must leave the new one alone.
	fleettest.Eventually(t, 0, func() error {
		if got := aware.get("x"); got != newer {
			return fmt.Errorf("engaged instance is %p, want the replacement %p", got, newer)
		}
		return nil
	})
	if got, err := c.Get(ctx, "x"); err != nil || got != newer {
		t.Fatalf("Get after replace = %v, %v", got, err)
	}

	// The Aware refuses the next replacement: the previous cluster stays
	// engaged, and Get answers it.
	bad := testbed.NewCluster(t, fleet.Config(0))
	aware.refuse(bad)
	if err := c.AddOrReplace(ctx, "x", bad, aware); err == nil {
		t.Fatal("a refused replacement succeeded")
	}
	if got, err := c.Get(ctx, "x"); err != nil || got != newer {
		t.Fatalf("after a failed replacement Get = %v, %v; want the previous cluster", got, err)
	}
	if got := aware.get("x"); got != newer {
		t.Fatalf("after a failed replacement the Aware holds %p, want the previous cluster %p", got, newer)
	}
}

// A Clusters is bound to the Aware of its first call: another is refused,
// naming the cluster, and nothing is published for it.
func TestClustersBindOneAware(t *testing.T) {
	c := clusters.New[cluster.Cluster]()
	first, other := &engagements{}, &engagements{}
	if err := c.Add(t.Context(), "a", testbed.NewCluster(t, fleet.Config(0)), first); err != nil {
		t.Fatal(err)
	}
	err := c.Add(t.Context(), "b", testbed.NewCluster(t, fleet.Config(0)), other)
	if !errors.Is(err, clusters.ErrOtherAware) || !strings.Contains(err.Error(), `"b"`) {
		t.Fatalf("Add with another Aware: %v, want ErrOtherAware naming the cluster", err)
	}
	if names := c.ClusterNames(); len(names) != 1 || names[0] != "a" {
		t.Fatalf("ClusterNames = %v, want [a]", names)
	}
	if other.total.Load() != 0 {
		t.Fatal("the other Aware was engaged")
	}
}

// choosy is an Aware that records what it holds, refuses the clusters it is
// told to, and holds the engagement of one cluster until released.
type choosy struct {
	engagements
	mu      sync.Mutex
	refused map[cluster.Cluster]bool
	hold    cluster.Cluster
	entered chan struct{}
	release chan struct{}
}

func (a *choosy) refuse(cl cluster.Cluster) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refused == nil {
		a.refused = map[cluster.Cluster]bool{}
	}
	a.refused[cl] = true
}

// holdUntil has the engagement of cl wait until release is closed, after
// closing entered.
func (a *choosy) holdUntil(cl cluster.Cluster) (entered, release chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hold, a.entered, a.release = cl, make(chan struct{}), make(chan struct{})
	return a.entered, a.release
}

func (a *choosy) Engage(ctx context.Context, name string, cl cluster.Cluster) error {
	a.mu.Lock()
	refused, held := a.refused[cl], a.hold == cl && cl != nil
	entered, release := a.entered, a.release
	a.mu.Unlock()
	if held {
		close(entered)
		select {
		case <-release:
		case <-ctx.Done():
		}
	}
	if refused {
		return errors.New("refused")
	}
	return a.engagements.Engage(ctx, name, cl)
}

// Concurrent use is race-free (run with -race) and ends consistent.
func TestConcurrentUse(t *testing.T) {
	c := clusters.New[cluster.Cluster]()
	ctx := t.Context()
	aware := &engagements{}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			name := fmt.Sprintf("c%d", i%4)
			cl := testbed.NewCluster(t, fleet.Config(i%2))
			_ = c.AddOrReplace(ctx, name, cl, aware)
			_, _ = c.Get(ctx, name)
			_ = c.ClusterNames()
			if i%3 == 0 {
				c.Remove(name)
			}
		})
		wg.Go(func() {
			_ = c.IndexField(ctx, &corev1.ConfigMap{}, fmt.Sprintf("f%d", i), func(client.Object) []string { return nil })
		})
	}
	wg.Wait()
	for _, name := range c.ClusterNames() {
		if _, err := c.Get(ctx, name); err != nil {
			t.Errorf("listed cluster %q is not gettable: %v", name, err)
		}
	}
}

// Two replacements in flight for one name: the newest supersedes the one
// still engaging, which fails; the newest is engaged and the original
// cluster's engagement ends (the engine started it, and stops it).
func TestOverlappingReplacements(t *testing.T) {
	c := clusters.New[cluster.Cluster]()
	ctx := t.Context()
	aware := &choosy{}
	original := testbed.NewCluster(t, fleet.Config(0))
	if err := c.AddOrReplace(ctx, "x", original, aware); err != nil {
		t.Fatal(err)
	}

	slow := testbed.NewCluster(t, fleet.Config(1))
	entered, release := aware.holdUntil(slow)
	aware.refuse(slow)
	bDone := make(chan error, 1)
	go func() { bDone <- c.AddOrReplace(ctx, "x", slow, aware) }()
	<-entered

	newest := testbed.NewCluster(t, fleet.Config(0))
	cDone := make(chan error, 1)
	go func() { cDone <- c.AddOrReplace(ctx, "x", newest, aware) }()
	fleettest.Eventually(t, 0, func() error {
		if _, err := c.Get(ctx, "x"); err != nil {
			return err
		}
		select {
		case err := <-bDone:
			bDone <- err
			return nil
		default:
			return errors.New("the replacement still engaging has not returned")
		}
	})
	close(release)
	if err := <-bDone; err == nil {
		t.Fatal("the superseded replacement succeeded")
	}
	if err := <-cDone; err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, "x"); err != nil || got != newest {
		t.Fatalf("Get = %v, %v; want the newest cluster", got, err)
	}
	fleettest.Eventually(t, 0, func() error {
		if got := aware.get("x"); got != newest {
			return fmt.Errorf("the Aware holds %p, want the newest %p", got, newest)
		}
		return nil
	})
}
