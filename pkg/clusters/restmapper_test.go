package clusters_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
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
