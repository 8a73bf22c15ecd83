package clusters_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mcruntime/multicluster-runtime/internal/mctest"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/clusters"
)

// A second Start of a running provider is refused with an error that matches
// multicluster.ErrAlreadyStarted by identity.
func TestSecondStartIsAlreadyStarted(t *testing.T) {
	p := clusters.New()
	tracker := fleettest.NewTracker()
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { first <- p.Start(ctx, tracker) }()
	defer func() {
		cancel()
		if err := <-first; err != nil {
			t.Errorf("first Start: %v", err)
		}
	}()
	if err := p.Add(ctx, "a", mctest.NewCluster(t, fleet.Config(1))); err != nil {
		t.Fatal(err)
	}
	mctest.Eventually(t, 0, func() error { // engaged: Start runs
		if tracker.Engaged()["a"] == nil {
			return errors.New(`"a" not engaged`)
		}
		return nil
	})

	if err := p.Start(ctx, tracker); !errors.Is(err, multicluster.ErrAlreadyStarted) {
		t.Fatalf("second Start: %v, want an error matching multicluster.ErrAlreadyStarted", err)
	}
}
