package clusters_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcfleet "github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// Clusters share discovery only with clusters that reach the same server as
// the same user, and a cluster's share is released when it stops, not when
// the garbage collector runs.
func TestSharedMapperOnlyBetweenIdenticalIdentities(t *testing.T) {
	// Impersonated identities of their own keep other tests' clusters out of
	// the counts.
	as := func(user string) *rest.Config {
		cfg := fleet.Config(1)
		cfg.Impersonate.UserName = user
		return cfg
	}

	build := func(cfg *rest.Config) cluster.Cluster {
		cl, err := clusters.NewCluster(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	a, b, c := build(as("mapper-test")), build(as("mapper-test")), build(as("someone-else"))
	shared := clusters.SharedMapperOf(a.GetRESTMapper())
	if clusters.SharedMapperOf(b.GetRESTMapper()) != shared {
		t.Error("two clusters with the same server and credentials do not share discovery")
	}
	if clusters.SharedMapperOf(c.GetRESTMapper()) == shared {
		t.Error("a cluster with other credentials shares discovery: its lookups would run as someone else")
	}
	if n := clusters.SharedMapperRefs(shared); n != 2 {
		t.Fatalf("shared mapper held by %d clusters, want 2", n)
	}

	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 2)
	for _, cl := range []cluster.Cluster{a, b} {
		go func() { stopped <- cl.Start(ctx) }()
	}
	for _, cl := range []cluster.Cluster{a, b} {
		if !cl.GetCache().WaitForCacheSync(ctx) {
			t.Fatal("cache did not sync")
		}
	}
	cancel()
	for range 2 {
		<-stopped
	}
	fleettest.Eventually(t, 10*time.Second, func() error {
		if n := clusters.SharedMapperRefs(shared); n != 0 {
			return fmt.Errorf("shared mapper still held by %d stopped clusters", n)
		}
		return nil
	})
}

// Two members built with one token share discovery; one of them rotates its
// token in place. The other's lookups keep carrying the shared token (they
// went out with the rotated one, through the rotated cluster's HTTP client,
// and failed once it was revoked), and the rotated one's carry its new token
// (they keep working once the token it was built with is revoked).
func TestSharedMapperSendsEachClustersOwnCredentials(t *testing.T) {
	defer clusters.SetMinRefresh(100 * time.Millisecond)()
	tk := newTokens(t, 1)
	tracker := fleettest.NewTracker()
	var m clusters.Members
	runEngine(t, mcfleet.Options{}, tracker, &m)
	engaged := func(name, token string) cluster.Cluster {
		t.Helper()
		var cl cluster.Cluster
		fleettest.Eventually(t, 30*time.Second, func() error {
			cl = tracker.Engaged()[name]
			if cl == nil || cl.GetConfig().BearerToken != token {
				return fmt.Errorf("%s is not engaged with its token", name)
			}
			return nil
		})
		return cl
	}
	mapped := func(cl cluster.Cluster, group, kind string) {
		t.Helper()
		fleettest.Eventually(t, 20*time.Second, func() error {
			_, err := cl.GetRESTMapper().RESTMapping(schema.GroupKind{Group: group, Kind: kind})
			return err
		})
	}
	admin := fleet.Config(1)
	group := testbed.Name("mapper") + ".example.com"

	cfg1, holder1 := tk.config(t)
	// One after the other: the first builds the shared mapper.
	m.Set("a", "token-1", cfg1, nil)
	a := engaged("a", cfg1.BearerToken)
	m.Set("b", "token-1", cfg1, nil)
	b := engaged("b", cfg1.BearerToken)
	shared1 := clusters.SharedMapperOf(a.GetRESTMapper())
	if clusters.SharedMapperOf(b.GetRESTMapper()) != shared1 {
		t.Fatal("two members built with one token do not share discovery")
	}
	if !clusters.MapperSharesConnections(b) {
		t.Error("the shared mapper does not use the connections of the clusters it serves")
	}

	cfg2, holder2 := tk.config(t)
	if _, changed := m.Set("a", "token-2", cfg2, nil); changed {
		t.Fatal("a new token for a running member was not rotated in place")
	}
	if tracker.Engaged()["a"] != a {
		t.Fatal("the rotation replaced the cluster")
	}
	// a's share follows its credentials once they are rotated in (after
	// their trial); the mapper of the first token is b's alone.
	fleettest.Eventually(t, 20*time.Second, func() error {
		if clusters.SharedMapperOf(a.GetRESTMapper()) == shared1 {
			return fmt.Errorf("after the rotation, a still shares the mapper of its old token")
		}
		if n := clusters.SharedMapperRefs(shared1); n != 1 {
			return fmt.Errorf("the mapper of the first token is held by %d clusters after a moved away, want 1 (b)", n)
		}
		return nil
	})
	if !clusters.MapperSharesConnections(a) {
		t.Error("the mapper of the rotated token does not use the cluster's connections")
	}

	tk.invalidate(t, holder2)
	refused(t, cfg2)
	installCRD(t, admin, group, "Gadget")
	mapped(b, group, "Gadget")
	shared2 := clusters.SharedMapperOf(a.GetRESTMapper())

	// And the converse: a, rotated again, maps a kind installed after the
	// token it was built with, and b's, is revoked.
	cfg3, _ := tk.config(t)
	if _, changed := m.Set("a", "token-3", cfg3, nil); changed {
		t.Fatal("a new token for a running member was not rotated in place")
	}
	fleettest.Eventually(t, 20*time.Second, func() error {
		if n := clusters.SharedMapperRefs(shared2); n != 0 {
			return fmt.Errorf("the mapper of the second token is held by %d clusters after a moved away, want none", n)
		}
		return nil
	})
	tk.invalidate(t, holder1)
	refused(t, cfg1)
	installCRD(t, admin, group, "Gizmo")
	mapped(a, group, "Gizmo")
}

// refused waits until cfg's server refuses its credentials.
func refused(t *testing.T, cfg *rest.Config) {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(cfg)
	fleettest.Eventually(t, 30*time.Second, func() error {
		if _, err := cs.Discovery().ServerGroups(); !apierrors.IsUnauthorized(err) {
			return fmt.Errorf("the credentials are still accepted (%v)", err)
		}
		return nil
	})
}
