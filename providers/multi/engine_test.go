package multi

import (
	"context"
	"fmt"
	"testing"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	clustersprovider "github.com/mcruntime/multicluster-runtime/providers/clusters"
)

// Started with an Aware that is not the manager, the multi provider runs a
// fleet engine of its own: inner providers hand their clusters to it, the
// Aware is engaged with them under prefixed names, and disengaged when the
// inner provider is removed.
func TestOwnEngineForAnAwareThatIsNotAPublisher(t *testing.T) {
	inner := clustersprovider.New()
	cl := testbed.NewCluster(t, fleet.Config(1))
	if err := inner.Add(context.Background(), "one", cl); err != nil {
		t.Fatal(err)
	}
	m := New(Options{})
	if err := m.AddProvider("p", inner); err != nil {
		t.Fatal(err)
	}
	tr := fleettest.NewTracker()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx, tr) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	fleettest.Eventually(t, 0, func() error {
		if got := tr.Engaged()["p#one"]; got != cl {
			return fmt.Errorf("p#one engaged with %v, want the inner provider's cluster", got)
		}
		return nil
	})
	m.RemoveProvider("p")
	tr.WaitDisengaged(t, cl)
}
