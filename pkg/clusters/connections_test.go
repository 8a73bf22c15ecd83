package clusters_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcfleet "github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// whoAmI returns the user cl's requests authenticate as.
func whoAmI(ctx context.Context, cl cluster.Cluster) (string, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := cl.GetClient().Create(ctx, review); err != nil {
		return "", err
	}
	return review.Status.UserInfo.Username, nil
}

// watchConfigMaps lists ConfigMaps through cl's cache: its informer keeps a
// watch open on one of the cluster's connections while the cluster runs.
func watchConfigMaps(t *testing.T, cl cluster.Cluster) {
	t.Helper()
	if err := cl.GetClient().List(context.Background(), &corev1.ConfigMapList{}); err != nil {
		t.Fatal(err)
	}
}

// expectEngaged waits until exactly the clusters of names are engaged in
// tracker, and returns them.
func expectEngaged(t *testing.T, tracker *fleettest.Tracker, names ...multicluster.ClusterName) map[multicluster.ClusterName]cluster.Cluster {
	t.Helper()
	var got map[multicluster.ClusterName]cluster.Cluster
	fleettest.Eventually(t, fleettest.DefaultTimeout, func() error {
		got = tracker.Engaged()
		if len(got) != len(names) {
			return fmt.Errorf("%d clusters engaged, want %d", len(got), len(names))
		}
		for _, name := range names {
			if got[name] == nil {
				return fmt.Errorf("%q is not engaged", name)
			}
		}
		return nil
	})
	return got
}

// noOpenConnections waits until no connection through proxy is open.
func noOpenConnections(t *testing.T, proxy *testbed.Proxy, after string) {
	t.Helper()
	fleettest.Eventually(t, 20*time.Second, func() error {
		if n := proxy.Open(); n > 0 {
			return fmt.Errorf("%d connections to the member are still open %s", n, after)
		}
		return nil
	})
}

// A cluster whose client certificate was rotated in place closes the
// connections it made when it stops, those of the new certificate (its own
// transport) and those of the first (client-go's shared transport), as
// docs/advanced/security.md says: nothing else uses them.
func TestStoppedClusterClosesItsConnectionsAfterACertificateRotation(t *testing.T) {
	const member = 1
	var users [2]*rest.Config
	var names [2]string
	for i := range users {
		names[i] = testbed.Name("cert-user")
		cfg, err := fleet.AddUser(member, envtest.User{Name: names[i], Groups: []string{"system:masters"}})
		if err != nil {
			t.Fatal(err)
		}
		users[i] = cfg
	}
	one, proxy := testbed.Proxied(t, users[0])
	two := rest.CopyConfig(one)
	two.CertData, two.KeyData = users[1].CertData, users[1].KeyData

	tracker := fleettest.NewTracker()
	var m clusters.Members
	runEngine(t, mcfleet.Options{}, tracker, &m)
	m.Set("member", "one", one, nil)
	cl := expectEngaged(t, tracker, "member")["member"]
	watchConfigMaps(t, cl)
	engagements := tracker.Count("member")
	m.Set("member", "two", two, nil)
	ctx := context.Background()
	fleettest.Eventually(t, 30*time.Second, func() error {
		user, err := whoAmI(ctx, cl)
		if err != nil {
			return err
		}
		if user != names[1] {
			return fmt.Errorf("the cluster authenticates as %q, want %q", user, names[1])
		}
		return nil
	})
	if n := tracker.Count("member"); n != engagements {
		t.Fatalf("a new client certificate of the same user kind engaged the member %d more times, want a rotation in place", n-engagements)
	}
	if proxy.Open() == 0 {
		t.Fatal("no connection to the member is open while the cluster runs: nothing to measure")
	}

	m.Remove("member")
	tracker.WaitDisengaged(t, cl)
	noOpenConnections(t, proxy, "after the cluster stopped")
}

// Clusters that come and go on one member reuse one connection to it: the
// check that its server answers before a build goes over the connections
// of the cluster being built, not a transport of its own, whose connection
// would stay open for client-go's idle timeout (90 s) after each check. A
// cluster that stops closes its idle connections.
func TestChurnKeepsTheConnectionsToAMemberBounded(t *testing.T) {
	const member, names, rounds, bound = 0, 20, 5, 3
	cfg, proxy := testbed.Proxied(t, fleet.Config(member))
	tracker := fleettest.NewTracker()
	var m clusters.Members
	runEngine(t, mcfleet.Options{}, tracker, &m)

	var want []multicluster.ClusterName
	for i := range names {
		want = append(want, fmt.Sprintf("member-%d", i))
	}
	most := 0
	for round := range rounds {
		for _, name := range want {
			m.Set(name, "hash", cfg, nil)
		}
		engaged := expectEngaged(t, tracker, want...)
		for _, cl := range engaged {
			watchConfigMaps(t, cl)
		}
		most = max(most, proxy.Open())
		for _, name := range want {
			m.Remove(name)
		}
		for _, cl := range engaged {
			tracker.WaitDisengaged(t, cl)
		}
		// A process's garbage collector runs between one publish and the
		// next: a transport that nothing holds is gone from client-go's
		// cache, and the next client of its configuration gets a new one.
		runtime.GC()
		most = max(most, proxy.Open())
		t.Logf("round %d: %d connections open, at most %d so far (%d accepted)", round, proxy.Open(), most, proxy.Attempts())
	}
	if most > bound {
		t.Errorf("%d rounds of %d clusters of one member opened up to %d connections at once, want at most %d", rounds, names, most, bound)
	}
	noOpenConnections(t, proxy, "after every cluster stopped")
}
