package file_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/file"
)

// RunOnce engages the clusters of the files as they are, and returns; the
// provider cannot then be started as well. Its clusters go when ctx ends.
func TestRunOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "one.kubeconfig")
	if err := os.WriteFile(path, kubeconfig(t, map[string]int{"a": 1, "b": 2}), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := file.New(file.Options{KubeconfigDirs: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	tr := fleettest.NewTracker()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := p.RunOnce(ctx, tr); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Listed():
	default:
		t.Fatal("RunOnce returned before the provider listed its clusters")
	}
	fleettest.ExpectEngaged(t, tr, map[multicluster.ClusterName]int{path + "+a": 1, path + "+b": 2})
	if err := p.Start(ctx, tr); !errors.Is(err, multicluster.ErrAlreadyStarted) {
		t.Fatalf("Start after RunOnce: %v, want ErrAlreadyStarted", err)
	}
	cancel()
	fleettest.Eventually(t, 0, func() error {
		if got := tr.Engaged(); len(got) > 0 {
			return errors.New("clusters still engaged after RunOnce's context ended")
		}
		return nil
	})
}
