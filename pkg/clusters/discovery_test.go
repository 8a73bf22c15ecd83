package clusters_test

import (
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

// Two members built with one token; one of them rotates its token in place.
// Each cluster's discovery goes through its own HTTP client, so each
// carries that cluster's current credentials: the other's lookups keep
// working with the token they share once the rotated one's new token is
// revoked, and the rotated one's keep working once the token it was built
// with is revoked.
func TestDiscoverySendsEachClustersOwnCredentials(t *testing.T) {
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
	m.Set("a", "token-1", cfg1, nil)
	a := engaged("a", cfg1.BearerToken)
	m.Set("b", "token-1", cfg1, nil)
	b := engaged("b", cfg1.BearerToken)
	if !clusters.MapperSharesConnections(b) {
		t.Error("the cluster's REST mapper does not use the cluster's connections")
	}

	cfg2, holder2 := tk.config(t)
	m.Set("a", "token-2", cfg2, nil)
	if tracker.Engaged()["a"] != a {
		t.Fatal("the rotation replaced the cluster")
	}
	if !clusters.MapperSharesConnections(a) {
		t.Error("after the rotation, the cluster's REST mapper does not use the cluster's connections")
	}

	tk.invalidate(t, holder2)
	refused(t, cfg2)
	testbed.InstallCRD(t, admin, group, "Gadget")
	mapped(b, group, "Gadget")

	// And the converse: a, rotated again, maps a kind installed after the
	// token it was built with, and b's, is revoked.
	cfg3, _ := tk.config(t)
	m.Set("a", "token-3", cfg3, nil)
	if tracker.Engaged()["a"] != a {
		t.Fatal("the second rotation replaced the cluster")
	}
	tk.invalidate(t, holder1)
	refused(t, cfg1)
	testbed.InstallCRD(t, admin, group, "Gizmo")
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
