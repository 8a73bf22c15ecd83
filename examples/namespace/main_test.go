package main

import (
	"context"
	"io"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// fleet is the package's fleet of real control planes.
var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	testbed.MustProvideAssets()
	fleettest.RunMain(m, 1, func(f *fleettest.Fleet) { fleet = f })
}

// A namespace is a virtual cluster; inside it, objects live in "default".
func TestReconcilesTheVirtualClusters(t *testing.T) {
	out := testbed.RunExample(t, func(ctx context.Context, out io.Writer) error {
		return run(ctx, fleet.Config(0), testbed.ManagerOptions, out)
	})
	testbed.Create(t, fleet.Config(0), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}})
	testbed.Create(t, fleet.Config(0), testbed.ConfigMap("team-a", "hello"))
	testbed.WaitForOutput(t, out, "reconciled cluster://team-a/default/hello: 1 keys")
}
