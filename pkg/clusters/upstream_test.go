package clusters_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// With EqualClusters set, re-adding a rebuilt but unchanged cluster keeps the
// running one; without it, the rebuilt one replaces it.
func TestAddOrReplaceWithEqualClusters(t *testing.T) {
	for _, tc := range []struct {
		name        string
		equal       func(a, b cluster.Cluster) bool
		engagements int32
	}{
		{"EqualClusters set", clusters.EqualClusters[cluster.Cluster], 1},
		{"EqualClusters unset", nil, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := clusters.New[cluster.Cluster]()
			c.EqualClusters = tc.equal
			aware := &engagements{}
			first := testbed.NewCluster(t, fleet.Config(0))
			if err := c.AddOrReplace(t.Context(), "x", first, aware); err != nil {
				t.Fatal(err)
			}
			rebuilt := testbed.NewCluster(t, fleet.Config(0))
			if err := c.AddOrReplace(t.Context(), "x", rebuilt, aware); err != nil {
				t.Fatal(err)
			}
			if got := aware.total.Load(); got != tc.engagements {
				t.Fatalf("engagements after re-adding a rebuilt cluster: %d, want %d", got, tc.engagements)
			}
			want := first
			if tc.equal == nil {
				want = rebuilt
			}
			if got, err := c.GetTyped(t.Context(), "x"); err != nil || got != want {
				t.Fatalf("GetTyped = %p, %v; want %p", got, err, want)
			}
			other := testbed.NewCluster(t, fleet.Config(1))
			if err := c.AddOrReplace(t.Context(), "x", other, aware); err != nil {
				t.Fatal(err)
			}
			if got, _ := c.GetTyped(t.Context(), "x"); got != other {
				t.Fatal("a cluster of another API server did not replace the present one")
			}
		})
	}
}

func TestEqualClustersComparesConnections(t *testing.T) {
	a := testbed.NewCluster(t, fleet.Config(0))
	if !clusters.EqualClusters(a, a) {
		t.Error("a cluster is not equal to itself")
	}
	if !clusters.EqualClusters(a, testbed.NewCluster(t, fleet.Config(0))) {
		t.Error("two clusters of the same config are not equal")
	}
	if clusters.EqualClusters(a, testbed.NewCluster(t, fleet.Config(1))) {
		t.Error("clusters of two API servers are equal")
	}
	agent := fleet.Config(0)
	agent.UserAgent = "other"
	if clusters.EqualClusters(a, testbed.NewCluster(t, agent)) {
		t.Error("clusters of different user agents are equal")
	}
	wrapped := fleet.Config(0)
	wrapped.Dial = (&netDialer{}).dial
	if clusters.EqualClusters(a, testbed.NewCluster(t, wrapped)) {
		t.Error("a cluster with a dialer of its own equals one without")
	}
}

type netDialer struct{}

func (*netDialer) dial(context.Context, string, string) (net.Conn, error) {
	return nil, errors.New("no")
}

func TestGetTypedAndIndexers(t *testing.T) {
	c := clusters.New[cluster.Cluster]()
	if _, err := c.GetTyped(t.Context(), "nope"); !errors.Is(err, multicluster.ErrClusterNotFound) {
		t.Fatalf("GetTyped of an unknown name: %v, want ErrClusterNotFound", err)
	}
	extract := func(client.Object) []string { return nil }
	if err := c.IndexField(t.Context(), &corev1.ConfigMap{}, "by-x", extract); err != nil {
		t.Fatal(err)
	}
	idx := c.Indexers()
	if len(idx) != 1 || idx[0].Field != "by-x" || idx[0].Extractor == nil {
		t.Fatalf("Indexers = %+v", idx)
	}
	if _, ok := idx[0].Object.(*corev1.ConfigMap); !ok {
		t.Fatalf("Indexers' object is a %T", idx[0].Object)
	}
}

// A cluster that stops running on its own is given to ErrorHandler, with
// its name, as the engine reports it, and is no longer served.
func TestErrorHandlerHearsOfAClusterThatStopped(t *testing.T) {
	type call struct {
		err error
		msg string
		kv  []any
	}
	calls := make(chan call, 1)
	c := clusters.New[cluster.Cluster]()
	c.ErrorHandler = func(err error, msg string, kv ...any) { calls <- call{err, msg, kv} }
	cl := &stoppable{Cluster: testbed.NewCluster(t, fleet.Config(0))}
	if err := c.Add(t.Context(), "dies", cl, &engagements{}); err != nil {
		t.Fatal(err)
	}
	cl.stop()
	select {
	case got := <-calls:
		// The engine runs the cluster and reports its end as a failed
		// run, which it retries.
		if got.err == nil || !strings.Contains(got.msg, "fleet engine") || len(got.kv) != 2 || got.kv[1] != "dies" {
			t.Fatalf("ErrorHandler got %v %q %v", got.err, got.msg, got.kv)
		}
	case <-time.After(time.Minute):
		t.Fatal("ErrorHandler did not hear of the cluster that stopped")
	}
	fleettest.Eventually(t, 0, func() error {
		if _, err := c.Get(t.Context(), "dies"); err == nil {
			return errors.New("the stopped cluster is still present")
		}
		return nil
	})
}

// stoppable is a cluster whose Start the test can end while its context
// still runs.
type stoppable struct {
	cluster.Cluster
	mu     sync.Mutex
	cancel context.CancelFunc
}

func (s *stoppable) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	s.cancel = cancel
	s.mu.Unlock()
	return s.Cluster.Start(ctx)
}

func (s *stoppable) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cancel()
}

// WaitCacheTimeout bounds the wait for a cache when CacheSyncTimeout is unset.
func TestWaitCacheTimeout(t *testing.T) {
	c := clusters.New[cluster.Cluster]()
	c.WaitCacheTimeout = 300 * time.Millisecond
	if err := c.IndexField(t.Context(), &corev1.ConfigMap{}, "by-x", func(client.Object) []string { return nil }); err != nil {
		t.Fatal(err)
	}
	// A user who may discover the API but list nothing: the cache never syncs.
	nobody, err := fleet.AddUser(1, envtest.User{Name: "upstream-test-nobody"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = c.Add(t.Context(), "forbidden", testbed.NewCluster(t, nobody), &engagements{})
	if err == nil || !strings.Contains(err.Error(), "did not sync") {
		t.Fatalf("Add of a cluster that cannot list: %v, want a cache that did not sync", err)
	}
	t.Logf("Add gave up after %s", time.Since(start).Round(time.Millisecond))
}
