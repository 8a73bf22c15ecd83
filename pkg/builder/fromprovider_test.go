package builder_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	clustersprovider "github.com/mcruntime/multicluster-runtime/providers/clusters"
	"github.com/mcruntime/multicluster-runtime/providers/nop"
)

// A watch with WithClustersFromProvider covers the clusters of that
// provider, which the manager does not know; the other watches of the
// controller and the other controllers keep to the manager's clusters.
func TestWithClustersFromProvider(t *testing.T) {
	e := newEnv(t)
	other := clustersprovider.New()
	if err := other.Add(t.Context(), "other-3", testbed.NewCluster(t, memberConfig(3))); err != nil {
		t.Fatal(err)
	}
	fromOther, mixed, managers := e.recorder(), e.recorder(), e.recorder()
	must(t, e.builder("from-other").For(&corev1.ConfigMap{}, mcbuilder.WithClustersFromProvider(t.Context(), other)).Complete(fromOther))
	// A filter still applies to the other provider's clusters, and sees each
	// cluster as the provider built it.
	must(t, e.builder("mixed").
		For(&corev1.ConfigMap{}, mcbuilder.WithClustersFromProvider(t.Context(), otherOf(t)), mcbuilder.WithClusterFilter(
			func(_ multicluster.ClusterName, cl cluster.Cluster) bool {
				return cl.GetConfig().Host == memberConfig(2).Host
			})).
		Complete(mixed))
	must(t, e.builder("managers").For(&corev1.ConfigMap{}).Complete(managers))

	e.engage(1)
	fleettest.RunManager(t, e.mgr)
	testbed.CreateConfigMap(t, e.members[0], e.ns, "cm", nil) // member 1: the manager's
	testbed.CreateConfigMap(t, e.members[1], e.ns, "cm", nil) // member 2: otherOf's
	testbed.CreateConfigMap(t, e.members[2], e.ns, "cm", nil) // member 3: other's

	fromOther.WaitFor(t, 1, "other-3", e.ns, "cm")
	managers.WaitFor(t, 1, member(1), e.ns, "cm")
	mixed.WaitFor(t, 1, "other-2", e.ns, "cm")
	// Barriers: a later event in each cluster each controller watches.
	testbed.CreateConfigMap(t, e.members[0], e.ns, "barrier", nil)
	testbed.CreateConfigMap(t, e.members[2], e.ns, "barrier", nil)
	fromOther.WaitFor(t, 1, "other-3", e.ns, "barrier")
	managers.WaitFor(t, 1, member(1), e.ns, "barrier")
	if n := fromOther.Count(member(1), e.ns, "cm"); n != 0 {
		t.Errorf("the watch of the other provider saw the manager's cluster %d times", n)
	}
	if n := managers.Count("other-3", e.ns, "cm"); n != 0 {
		t.Errorf("a controller of the manager's clusters saw the other provider's %d times", n)
	}
	if n := mixed.Count(member(1), e.ns, "cm"); n != 0 {
		t.Errorf("the filtered watch of another provider saw the manager's cluster %d times", n)
	}
}

// otherOf returns a clusters provider holding member 2 as "other-2" and
// "other-1" (member 1 again, refused by the test's filter).
func otherOf(t *testing.T) *clustersprovider.Provider {
	p := clustersprovider.New()
	for name, i := range map[string]int{"other-2": 2, "other-1": 1} {
		if err := p.Add(context.Background(), name, testbed.NewCluster(t, memberConfig(i))); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func TestWithClustersFromProviderRefusesProvidersThatDoNotRun(t *testing.T) {
	e := newEnv(t)
	err := e.builder().For(&corev1.ConfigMap{}, mcbuilder.WithClustersFromProvider(t.Context(), struct{ multicluster.Provider }{nop.New()})).Complete(e.recorder())
	if err == nil || !strings.Contains(err.Error(), "not a multicluster.ProviderRunnable") {
		t.Fatalf("Complete with a provider that engages nothing: %v", err)
	}
	err = e.builder("own").For(&corev1.ConfigMap{}, mcbuilder.WithClustersFromProvider(t.Context(), e.provider)).Complete(e.recorder())
	if err == nil || !strings.Contains(err.Error(), "is the manager's") {
		t.Fatalf("Complete with the manager's provider: %v", err)
	}
}
