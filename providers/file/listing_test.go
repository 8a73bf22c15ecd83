package file_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetpkg "github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/file"
)

// slowStart is a file provider whose files take long to read: it starts
// listing only once gate is closed (a volume mounted late, a slow disk).
type slowStart struct {
	*file.Provider
	gate chan struct{}
}

func (s slowStart) Start(ctx context.Context, aware multicluster.Aware) error {
	select {
	case <-s.gate:
	case <-ctx.Done():
		return nil
	}
	return s.Provider.Start(ctx, aware)
}

// The readiness check "clusters" must not pass before the provider has
// published the clusters it finds at start-up: a replica Ready with an empty
// fleet takes traffic (and, in a rolling update, lets the old pod go) before
// it runs anything. Once the provider has listed, readiness waits for every
// cluster listed to be engaged.
func TestReadinessWaitsForTheProvidersFirstListing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.kubeconfig")
	if err := os.WriteFile(path, kubeconfig(t, map[string]int{"zero": 0, "one": 1, "two": 2}), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := file.New(file.Options{KubeconfigFiles: []string{path}})
	if err != nil {
		t.Fatal(err)
	}
	slow := slowStart{Provider: p, gate: make(chan struct{})}
	mgr, err := mcmanager.New(fleet.Config(0), slow, mcmanager.Options{
		Metrics:    server.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	engine := mgr.(mcmanager.FleetOwner).Fleet()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	// Once the engine runs, readiness answers; the provider has not listed.
	var notReady error
	fleettest.Eventually(t, time.Minute, func() error {
		notReady = engine.Ready(nil)
		if notReady != nil && strings.Contains(notReady.Error(), "has not started") {
			return notReady
		}
		return nil
	})
	if notReady == nil {
		t.Fatal("ready before the provider listed its clusters")
	}
	t.Logf("before the listing: %v", notReady)

	close(slow.gate)
	fleettest.Eventually(t, 2*time.Minute, func() error { return engine.Ready(nil) })
	for _, ctxName := range []string{"zero", "one", "two"} {
		name := path + file.DefaultSeparator + ctxName
		if st, ok := engine.State(name); !ok || st != fleetpkg.StateEngaged {
			t.Errorf("ready while cluster %q is %q (known: %v)", name, st, ok)
		}
	}
}
