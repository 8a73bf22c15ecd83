package fleettest

import (
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// NewManager returns a Multi-Cluster Manager for the host at cfg with the
// metrics server and health probes off, so that tests running at once do not
// fight over ports. Start it with RunManager.
func NewManager(t testing.TB, cfg *rest.Config, provider multicluster.Provider, opts ...mcmanager.Option) mcmanager.Manager {
	t.Helper()
	mgr, err := mcmanager.New(cfg, provider, mcmanager.Options{
		Metrics:                server.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}
