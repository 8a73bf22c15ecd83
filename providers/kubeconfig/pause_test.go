package kubeconfig_test

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/internal/pausetest"
	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/inventory"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

// The annotation multicluster-runtime.io/paused on a kubeconfig Secret
// pauses its cluster without rebuilding it; removing it reconciles each held
// key once.
func TestPausedAnnotationOnTheSecretPausesTheCluster(t *testing.T) {
	ctx := context.Background()
	ns := testbed.Name("paused")
	member := testbed.NewClient(t, fleet.Config(1))
	testbed.CreateNamespace(t, member, ns)
	rec := &fleettest.Recorder{Namespace: ns}
	e := startSetUp(t, nil, kubeconfig.Options{}, func(mgr mcmanager.Manager) { pausetest.Controller(t, mgr, rec) })
	secret := e.secret(t, "paused", 1)
	if err := e.host.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	pausetest.Scenario{
		Manager: e.mgr, Recorder: rec, Tracker: e.tracker, Cluster: "paused",
		Member: member, Namespace: ns,
		SetPaused: func(t testing.TB, paused bool) {
			patch := client.MergeFrom(secret.DeepCopy())
			if paused {
				secret.Annotations = map[string]string{inventory.PausedAnnotation: "true"}
			} else {
				delete(secret.Annotations, inventory.PausedAnnotation)
			}
			if err := e.host.Patch(ctx, secret, patch); err != nil {
				t.Fatal(err)
			}
		},
	}.Run(t)
}
