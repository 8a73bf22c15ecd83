package capi_test

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/internal/pausetest"
	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/inventory"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	capi "github.com/mcruntime/multicluster-runtime/providers/cluster-api"
)

// The annotation multicluster-runtime.io/paused on a Cluster API Cluster
// (the object the provider watches, not its kubeconfig Secret) pauses its
// cluster without rebuilding it; removing it reconciles each held key once.
func TestPausedAnnotationOnTheClusterPausesIt(t *testing.T) {
	ctx := context.Background()
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
		SetPaused: func(t testing.TB, paused bool) {
			patch := client.MergeFrom(c.DeepCopy())
			if paused {
				c.Annotations = map[string]string{inventory.PausedAnnotation: "true"}
			} else {
				delete(c.Annotations, inventory.PausedAnnotation)
			}
			if err := e.host.Patch(ctx, c, patch); err != nil {
				t.Fatal(err)
			}
		},
	}.Run(t)
}
