package main

import (
	"context"
	"fmt"
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

// Each kubeconfig given becomes a cluster named after its position.
func TestReconcilesTheClustersAddedInCode(t *testing.T) {
	var paths []string
	for i := range fleet.Len() {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("%d.kubeconfig", i))
		if err := fleet.WriteKubeconfig(i, path, "c"); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	out := exampletest.Start(t, func(ctx context.Context, out io.Writer) error {
		return run(ctx, fleet.Config(0), paths, exampletest.ManagerOptions, out)
	})
	exampletest.Create(t, fleet.Config(1), exampletest.ConfigMap("default", "hello"))
	exampletest.WaitFor(t, out, "reconciled cluster://member-1/default/hello")
}
