package clusterinventoryapi_test

import (
	"testing"

	"github.com/mcruntime/multicluster-runtime/internal/pausetest"
	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	clusterinventoryapi "github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api"
)

// The annotation multicluster-runtime.io/paused on a ClusterProfile pauses
// its cluster without rebuilding it; removing it reconciles each held key
// once.
func TestPausedAnnotationOnTheProfilePausesItsCluster(t *testing.T) {
	ns := testbed.Name("paused")
	member := testbed.NewClient(t, fleet.Config(1))
	testbed.CreateNamespace(t, member, ns)
	rec := &fleettest.Recorder{Namespace: ns}
	e := startSetUp(t, clusterinventoryapi.Options{AccessProviders: []clusterinventoryapi.AccessProvider{
		pluginProvider(t, "sa-token", "-service-account="+saName),
	}}, func(mgr mcmanager.Manager) { pausetest.Controller(t, mgr, rec) })
	cp := e.create(t, profile{name: "paused", member: 1, healthy: true, providers: []string{"sa-token"}})
	pausetest.Scenario{
		Manager: e.mgr, Recorder: rec, Tracker: e.tracker, Cluster: e.ns + "/paused",
		Member: member, Namespace: ns,
		SetPaused: pausetest.Annotate(e.hub, cp),
	}.Run(t)
}
