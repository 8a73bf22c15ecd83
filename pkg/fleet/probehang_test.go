package fleet_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// hangingTransport stands for a credential plugin that hangs: while hang is
// set, a request waits for release whatever its context says.
type hangingTransport struct {
	next    http.RoundTripper
	hang    *atomic.Bool
	release chan struct{}
}

func (h hangingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if h.hang.Load() {
		<-h.release
	}
	return h.next.RoundTrip(req)
}

// A probe whose request ignores its deadline still counts as failed once
// the timeout passes, and the worker stuck in it is replaced: the cluster is
// disconnected, even with a single probe worker.
func TestProbeThatHangsIsBounded(t *testing.T) {
	var hang atomic.Bool
	release := make(chan struct{})
	cfg := members.Config(1)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return hangingTransport{next: rt, hang: &hang, release: release}
	})
	stuck, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fine, err := cluster.New(members.Config(2))
	if err != nil {
		t.Fatal(err)
	}
	health := fleet.HealthOptions{Interval: 100 * time.Millisecond, Timeout: 200 * time.Millisecond, FailureThreshold: 2}
	// One worker: a worker stuck in the hanging request must be replaced for
	// the other cluster's probes to go on.
	eng := fleet.New(fleet.Options{Health: health, MaxConcurrentProbes: 1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Start(ctx) }()
	defer func() {
		cancel()
		close(release) // the hanging requests return, and their workers end
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	for name, cl := range map[string]cluster.Cluster{"stuck": stuck, "fine": fine} {
		if err := eng.Engage(ctx, name, cl); err != nil {
			t.Fatal(err)
		}
	}
	hang.Store(true)
	hungAt := time.Now()
	fleettest.Eventually(t, 30*time.Second, func() error {
		if s, _ := eng.State("stuck"); s != fleet.StateDisconnected {
			return fmt.Errorf("stuck is %s", s)
		}
		return nil
	})
	t.Logf("the hanging cluster was disconnected after %s", time.Since(hungAt))
	if s, _ := eng.State("fine"); s != fleet.StateEngaged {
		t.Errorf("fine is %s, want engaged", s)
	}
}
