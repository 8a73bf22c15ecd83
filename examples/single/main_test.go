package main

import (
	"context"
	"io"
	"testing"

	"go.uber.org/goleak"

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
	fleettest.RunMain(m, 1, func(f *fleettest.Fleet) { fleet = f },
		goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/watch.(*filteredWatch).loop"))
}

// One cluster under the name "only".
func TestReconcilesTheSingleCluster(t *testing.T) {
	out := testbed.RunExample(t, func(ctx context.Context, out io.Writer) error {
		return run(ctx, fleet.Config(0), false, testbed.ManagerOptions, out)
	})
	testbed.Create(t, fleet.Config(0), testbed.ConfigMap("default", "hello"))
	testbed.WaitForOutput(t, out, "reconciled cluster://only/default/hello")
}
