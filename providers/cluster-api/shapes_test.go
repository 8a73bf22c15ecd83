package capi_test

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	capi "github.com/mcruntime/multicluster-runtime/providers/cluster-api"
)

// Upstream's shapes of the Cluster API provider's rows of issue 41,
// compiled: ListClusters returns names, SetupWithManager takes the manager
// alone, IsReady takes a context. TestGetSecretAndListClusters and
// TestCustomIsReady run them against an API server.
var (
	_ func() []multicluster.ClusterName                   = (*capi.Provider)(nil).ListClusters
	_ func() map[multicluster.ClusterName]cluster.Cluster = (*capi.Provider)(nil).EngagedClusters
	_ func(mcmanager.Manager) error                       = (*capi.Provider)(nil).SetupWithManager
	_ func(context.Context, mcmanager.Manager) error      = (*capi.Provider)(nil).SetupWithManagerContext
	_ func(ctx context.Context, obj client.Object) bool   = capi.Options{}.IsReady
)

// A program appends the host to ListClusters' names and ranges over them, as
// upstream's do; before the provider runs there are no clusters.
func TestUpstreamListClustersShape(t *testing.T) {
	p := capi.New(capi.Options{IsReady: func(ctx context.Context, obj client.Object) bool {
		return ctx.Err() == nil && capi.DefaultIsReady(obj)
	}})
	names := append(p.ListClusters(), mcmanager.LocalCluster)
	if len(names) != 1 || names[0] != "" {
		t.Fatalf("names = %q, want the host alone", names)
	}
	if got := p.EngagedClusters(); len(got) != 0 {
		t.Fatalf("EngagedClusters = %v, want none", got)
	}
}
