package main

import (
	"context"
	"io"
	"testing"

	"github.com/mcruntime/multicluster-runtime/internal/exampletest"
	"github.com/mcruntime/multicluster-runtime/internal/testfleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// fleet is the package's fleet of real control planes.
var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	testfleet.RunMain(m, 1, func(f *fleettest.Fleet) { fleet = f })
}

// One cluster under the name "only".
func TestReconcilesTheSingleCluster(t *testing.T) {
	out := exampletest.Start(t, func(ctx context.Context, out io.Writer) error {
		return run(ctx, fleet.Config(0), false, exampletest.ManagerOptions, out)
	})
	exampletest.Create(t, fleet.Config(0), exampletest.ConfigMap("default", "hello"))
	exampletest.WaitFor(t, out, "reconciled cluster://only/default/hello")
}
