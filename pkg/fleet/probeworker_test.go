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

// slowTransport holds requests back until their context ends while slow is
// above zero (one request each), and counts the requests that come with a
// live context.
type slowTransport struct {
	next http.RoundTripper
	slow *atomic.Int32
	live *atomic.Int32
	held *atomic.Int32
}

func (s slowTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Context().Err() == nil {
		s.live.Add(1)
	}
	if s.slow.Add(-1) >= 0 {
		s.held.Add(1)
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return s.next.RoundTrip(req)
}

// engageProbed starts an engine with health and engages cl as "c".
func engageProbed(t *testing.T, health fleet.HealthOptions, cl cluster.Cluster) (*fleet.Engine, context.CancelFunc, <-chan error) {
	t.Helper()
	eng := fleet.New(fleet.Options{Health: health})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Start(ctx) }()
	if err := eng.Engage(ctx, "c", cl); err != nil {
		cancel()
		<-done
		t.Fatal(err)
	}
	return eng, cancel, done
}

// A probe cut off at its timeout cancels only itself: the probes after it
// send their request with a live context again (a probe's request and its
// context serve probe after probe until one is cancelled).
func TestProbeAfterATimeoutHasALiveContext(t *testing.T) {
	var slow, live, held atomic.Int32
	cfg := members.Config(1)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return slowTransport{next: rt, slow: &slow, live: &live, held: &held}
	})
	cl, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	health := fleet.HealthOptions{Interval: 50 * time.Millisecond, Timeout: 200 * time.Millisecond, FailureThreshold: 3}
	eng, cancel, done := engageProbed(t, health, cl)
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	slow.Store(1) // the next probe times out
	fleettest.Eventually(t, 30*time.Second, func() error {
		if held.Load() == 0 {
			return fmt.Errorf("no probe held back yet")
		}
		return nil
	})
	after := live.Load()
	fleettest.Eventually(t, 30*time.Second, func() error {
		if n := live.Load() - after; n < int32(2*health.FailureThreshold) {
			return fmt.Errorf("%d probes with a live context since the timeout, want %d", n, 2*health.FailureThreshold)
		}
		return nil
	})
	if s, _ := eng.State("c"); s != fleet.StateEngaged {
		t.Errorf("c is %s after one probe timed out, want engaged", s)
	}
}

// Stopping the engine cancels the probes in flight: Start returns without
// waiting for their timeout.
func TestStopCancelsProbesInFlight(t *testing.T) {
	var slow, live, held atomic.Int32
	cfg := members.Config(1)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return slowTransport{next: rt, slow: &slow, live: &live, held: &held}
	})
	cl, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	slow.Store(1 << 30) // every probe waits for its context
	health := fleet.HealthOptions{Interval: 50 * time.Millisecond, Timeout: time.Hour}
	_, cancel, done := engageProbed(t, health, cl)
	fleettest.Eventually(t, 30*time.Second, func() error {
		if held.Load() == 0 {
			return fmt.Errorf("no probe in flight yet")
		}
		return nil
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Start has not returned a minute after its context ended: the probe in flight (timeout 1h) was not cancelled")
	}
}
