package main

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// fleet is the package's fleet of real control planes.
var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	testbed.MustProvideAssets()
	fleettest.RunMain(m, 2, func(f *fleettest.Fleet) { fleet = f })
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
	out := testbed.RunExample(t, func(ctx context.Context, out io.Writer) error {
		return run(ctx, fleet.Config(0), dir, testbed.ManagerOptions, out)
	})
	testbed.Create(t, fleet.Config(1), testbed.ConfigMap("default", "hello"))
	testbed.WaitForOutput(t, out, "reconciled cluster://member-1/default/hello")
}
