package main

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/mcruntime/multicluster-runtime/internal/exampletest"
	"github.com/mcruntime/multicluster-runtime/internal/testfleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// fleet is the package's fleet of real control planes.
var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	testfleet.RunMain(m, 2, func(f *fleettest.Fleet) { fleet = f })
}

// Every kubeconfig file of the directory is a cluster, named by its context.
func TestReconcilesTheClustersOfTheFiles(t *testing.T) {
	dir := t.TempDir()
	for i := range fleet.Len() {
		name := "member-" + string(rune('0'+i))
		if err := fleet.WriteKubeconfig(i, filepath.Join(dir, name+".kubeconfig"), name); err != nil {
			t.Fatal(err)
		}
	}
	out := exampletest.Start(t, func(ctx context.Context, out io.Writer) error {
		return run(ctx, fleet.Config(0), dir, exampletest.ManagerOptions, out)
	})
	exampletest.Create(t, fleet.Config(1), exampletest.ConfigMap("default", "hello"))
	exampletest.WaitFor(t, out, "reconciled cluster://member-1/default/hello")
}
