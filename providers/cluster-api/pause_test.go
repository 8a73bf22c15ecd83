package capi_test

import (
	"testing"

	"github.com/mcruntime/multicluster-runtime/internal/pausetest"
	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	capi "github.com/mcruntime/multicluster-runtime/providers/cluster-api"
)

// The annotation multicluster-runtime.io/paused on a Cluster API Cluster
// (the object the provider watches, not its kubeconfig Secret) pauses its
// cluster without rebuilding it; removing it reconciles each held key once.
func TestPausedAnnotationOnTheClusterPausesIt(t *testing.T) {
	ns := testbed.Name("paused")
	member := testbed.NewClient(t, fleet.Config(1))
	testbed.CreateNamespace(t, member, ns)
	rec := &fleettest.Recorder{Namespace: ns}
	e := newEnv(t, 0)
	e.setup = func(mgr mcmanager.Manager) { pausetest.Controller(t, mgr, rec) }
	e.run(t, 0, capi.Options{}, nil)
	e.create(t, e.secret("paused", kubeconfig(t, 1, "capi-paused")))
	c := e.cluster(t, "paused", true, nil)
	pausetest.Scenario{
		Manager: e.mgr, Recorder: rec, Tracker: e.tracker, Cluster: e.name("paused"),
		Member: member, Namespace: ns,
		SetPaused: pausetest.Annotate(e.host, c),
	}.Run(t)
}
