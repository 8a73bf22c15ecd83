package main

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// fleet is the package's fleet of real control planes.
var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	testbed.MustProvideAssets()
	// The example's watch is metadata-only: controller-runtime wraps such a
	// watch in apimachinery's watch.Filter, whose goroutine blocks for ever on
	// a send when the informer stops with an event in flight (filter.go has no
	// stop path): an upstream leak, not one of ours.
	fleettest.RunMain(m, 2, func(f *fleettest.Fleet) { fleet = f },
		goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/watch.(*filteredWatch).loop"))
}

// Files under "files#", the host's namespaces under "ns#", in one fleet.
func TestReconcilesBothProviders(t *testing.T) {
	dir := t.TempDir()
	if err := fleet.WriteKubeconfig(1, filepath.Join(dir, "member-1.kubeconfig"), "member-1"); err != nil {
		t.Fatal(err)
	}
	testbed.Create(t, fleet.Config(0), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}})
	out := testbed.RunExample(t, func(ctx context.Context, out io.Writer) error {
		return run(ctx, fleet.Config(0), dir, testbed.ManagerOptions, out)
	})
	testbed.Create(t, fleet.Config(1), testbed.ConfigMap("default", "from-file"))
	testbed.Create(t, fleet.Config(0), testbed.ConfigMap("team-a", "from-namespace"))
	testbed.WaitForOutput(t, out, "member-1.kubeconfig+member-1/default/from-file")
	testbed.WaitForOutput(t, out, "reconciled cluster://files#")
	testbed.WaitForOutput(t, out, "reconciled cluster://ns#team-a/default/from-namespace")
}
