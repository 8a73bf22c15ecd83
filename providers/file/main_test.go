package file_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/file"
)

// fleet is shared by every test: tests only read from its members.
var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	testbed.MustProvideAssets()
	fleettest.RunMainWithOptions(m, 3, fleettest.Options{}, func(f *fleettest.Fleet) error {
		fleet = f
		return f.MarkMembers()
	})
}

func keys[V any](m map[multicluster.ClusterName]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// run starts p with a tracker until the test ends.
func run(t *testing.T, p *file.Provider, log logr.Logger) *fleettest.Tracker {
	t.Helper()
	tr := fleettest.NewTracker()
	ctx, cancel := context.WithCancel(logf.IntoContext(context.Background(), log))
	done := make(chan error, 1)
	go func() { done <- p.Start(ctx, tr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("provider returned %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("provider did not stop")
		}
		fleettest.Eventually(t, time.Minute, func() error { // every cluster disengaged
			if got := tr.Engaged(); len(got) > 0 {
				return fmt.Errorf("still engaged: %v", keys(got))
			}
			return nil
		})
	})
	return tr
}

// kubeconfig returns a kubeconfig with one context per entry, named after
// the entry and pointing at the given member.
func kubeconfig(t *testing.T, contexts map[string]int) []byte {
	t.Helper()
	merged := clientcmdapi.NewConfig()
	for name, m := range contexts {
		data, err := fleet.Kubeconfig(m, name)
		if err != nil {
			t.Fatal(err)
		}
		kc, err := clientcmd.Load(data)
		if err != nil {
			t.Fatal(err)
		}
		merged.Clusters[name] = kc.Clusters[name]
		merged.AuthInfos[name] = kc.AuthInfos[name]
		merged.Contexts[name] = kc.Contexts[name]
		merged.CurrentContext = name
	}
	out, err := clientcmd.Write(*merged)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// writeAtomically writes data to path the way editors and tools do: into a
// hidden temporary file, then renamed into place.
func writeAtomically(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
