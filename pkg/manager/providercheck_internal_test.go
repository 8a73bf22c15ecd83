package manager

import (
	"context"
	"errors"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

type checkingProvider struct {
	check func(context.Context, multicluster.ClusterName, cluster.Cluster) error
}

func (p checkingProvider) Get(context.Context, multicluster.ClusterName) (cluster.Cluster, error) {
	return nil, multicluster.ErrClusterNotFound
}

func (p checkingProvider) IndexField(context.Context, client.Object, string, client.IndexerFunc) error {
	return nil
}

func (p checkingProvider) ClusterHealthCheck() func(context.Context, multicluster.ClusterName, cluster.Cluster) error {
	return p.check
}

// The provider's check runs after the manager's, each must pass, and it adds
// to /readyz: SkipReadyz without a Check of the manager's stays ignored.
func TestProviderCheckRunsAfterTheManagersAndKeepsReadyz(t *testing.T) {
	var order []string
	providerErr := errors.New("provider says no")
	p := checkingProvider{check: func(context.Context, multicluster.ClusterName, cluster.Cluster) error {
		order = append(order, "provider")
		return providerErr
	}}
	h := withProviderCheck(fleet.HealthOptions{SkipReadyz: true}, p)
	if h.SkipReadyz || h.Check == nil {
		t.Fatalf("without a manager's Check: SkipReadyz %v, Check set %v; want false, true", h.SkipReadyz, h.Check != nil)
	}
	managerErr := errors.New("manager says no")
	var managerSays error
	h = withProviderCheck(fleet.HealthOptions{Check: func(context.Context, multicluster.ClusterName, cluster.Cluster) error {
		order = append(order, "manager")
		return managerSays
	}}, p)
	if err := h.Check(context.Background(), "a", nil); !errors.Is(err, providerErr) || len(order) != 2 || order[0] != "manager" {
		t.Errorf("both checks: %v after %v, want the provider's error after the manager's check", err, order)
	}
	order, managerSays = nil, managerErr
	if err := h.Check(context.Background(), "a", nil); !errors.Is(err, managerErr) || len(order) != 1 {
		t.Errorf("the manager's check failing: %v after %v, want its error and no provider check", err, order)
	}
	if h := withProviderCheck(fleet.HealthOptions{}, checkingProvider{}); h.Check != nil {
		t.Error("a provider without a check added one")
	}
}
