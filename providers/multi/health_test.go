package multi

import (
	"context"
	"errors"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/nop"
)

// checked is a provider with a health check of its own.
type checked struct {
	*nop.Provider
	seen []multicluster.ClusterName
}

func (c *checked) ClusterHealthCheck() func(context.Context, multicluster.ClusterName, cluster.Cluster) error {
	return func(_ context.Context, name multicluster.ClusterName, _ cluster.Cluster) error {
		c.seen = append(c.seen, name)
		return errors.New("unhealthy")
	}
}

// Each cluster is checked by its own provider's check, under its inner
// name; clusters of providers without one, or of no provider, pass.
func TestHealthCheckGoesToTheClustersProvider(t *testing.T) {
	m := New(Options{})
	east := &checked{Provider: nop.New()}
	if err := m.AddProvider("east", east); err != nil {
		t.Fatal(err)
	}
	if err := m.AddProvider("west", nop.New()); err != nil {
		t.Fatal(err)
	}
	check := m.ClusterHealthCheck()
	ctx := context.Background()
	if err := check(ctx, "east#a", nil); err == nil || len(east.seen) != 1 || east.seen[0] != "a" {
		t.Errorf("east#a: %v, east's check saw %v; want its error for a", err, east.seen)
	}
	for _, name := range []string{"west#a", "north#a", "plain"} {
		if err := check(ctx, name, nil); err != nil {
			t.Errorf("%s: %v, want no check", name, err)
		}
	}
	if len(east.seen) != 1 {
		t.Errorf("east's check ran for another provider's cluster: %v", east.seen)
	}
}
