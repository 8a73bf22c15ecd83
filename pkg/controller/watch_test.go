package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mccontroller "github.com/mcruntime/multicluster-runtime/pkg/controller"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"
)

// startCluster runs a cluster for cfg until the test ends.
func startCluster(t *testing.T, cfg *rest.Config) cluster.Cluster {
	t.Helper()
	cl := testbed.NewCluster(t, cfg)
	fleettest.RunManager(t, cl)
	return cl
}

// configMaps watches ConfigMaps in the clusters the provider engages.
func configMaps() mcsource.Source {
	return mcsource.WithEngageOptions(mcsource.Kind(&corev1.ConfigMap{}, mchandler.TypedEnqueueRequestForObject[*corev1.ConfigMap]()),
		mcsource.EngageOptions{ProviderClusters: true})
}

// A cluster engaged before Start is watched once the controller runs; its
// events reach the reconciler tagged with its name, until it disengages.
func TestKindWatchFollowsTheEngagement(t *testing.T) {
	ns := testbed.Name("watch")
	member := testbed.NewClient(t, fleet.Config(1))
	testbed.CreateNamespace(t, member, ns)
	rec := &fleettest.Recorder{Namespace: ns}
	c, name := newController(t, newManager(t), mccontroller.Options{Reconciler: rec})
	if err := c.MultiClusterWatch(configMaps()); err != nil {
		t.Fatal(err)
	}
	ctx, disengage := context.WithCancel(context.Background())
	defer disengage()
	if err := c.Engage(ctx, "m1", startCluster(t, fleet.Config(1))); err != nil {
		t.Fatal(err)
	}
	q, _ := run(t, c)

	testbed.CreateConfigMap(t, member, ns, "before", nil)
	rec.WaitFor(t, 1, "m1", ns, "before")
	disengage()
	// Once a request for the cluster is dropped, the controller has let go
	// (one that raced the disengagement is dropped as cluster-disengaged).
	drops := func() float64 { return dropped(name, "cluster-not-engaged") + dropped(name, "cluster-disengaged") }
	before := drops()
	q.Add(fleettest.Request("m1", ns, "probe"))
	fleettest.Eventually(t, 0, func() error {
		if drops() == before {
			return fmt.Errorf("requests for m1 are not dropped after it disengaged")
		}
		return nil
	})
	testbed.CreateConfigMap(t, member, ns, "after", nil)
	fleettest.Consistently(t, time.Second, func() error {
		if n := rec.Count("m1", ns, "after"); n != 0 {
			return fmt.Errorf("an object created after the cluster disengaged was reconciled %d times", n)
		}
		return nil
	})
}

// A watch that cannot sync (its list is forbidden) fails the engagement
// within CacheSyncTimeout, naming the controller, the cluster and the type.
func TestForbiddenWatchFailsTheEngagementNamingTheType(t *testing.T) {
	cfg, err := fleet.AddUser(1, envtest.User{Name: testbed.Name("nobody")})
	if err != nil {
		t.Fatal(err)
	}
	c, name := newController(t, newManager(t), mccontroller.Options{Reconciler: &fleettest.Recorder{}, CacheSyncTimeout: 3 * time.Second})
	if err := c.MultiClusterWatch(configMaps()); err != nil {
		t.Fatal(err)
	}
	run(t, c)
	err = c.Engage(context.Background(), "locked-out", startCluster(t, cfg))
	if err == nil {
		t.Fatal("a cluster whose ConfigMaps cannot be listed was engaged")
	}
	for _, want := range []string{name, "locked-out", "*v1.ConfigMap"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}
