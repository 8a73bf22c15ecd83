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
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

func TestIntervalAt(t *testing.T) {
	for _, tc := range []struct {
		h       fleet.HealthOptions
		engaged int
		want    time.Duration
	}{
		{fleet.HealthOptions{}, 0, 10 * time.Second},
		{fleet.HealthOptions{}, 3000, 10 * time.Second},
		{fleet.HealthOptions{}, 9000, 30 * time.Second},
		{fleet.HealthOptions{Interval: time.Second, MaxProbesPerSecond: 100}, 50, time.Second},
		{fleet.HealthOptions{Interval: time.Second, MaxProbesPerSecond: 100}, 500, 5 * time.Second},
		{fleet.HealthOptions{MaxProbesPerSecond: -1}, 100000, 10 * time.Second},
	} {
		if got := tc.h.IntervalAt(tc.engaged); got != tc.want {
			t.Errorf("%+v.IntervalAt(%d) = %s, want %s", tc.h, tc.engaged, got, tc.want)
		}
	}
}

// probeCounter is a cluster whose client counts the requests sent through
// it: the engine probes with the cluster's own client.
type probeCounter struct {
	cluster.Cluster
	hc *http.Client
	n  *atomic.Int64
}

type countingTransport struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(req)
}

func (p probeCounter) GetHTTPClient() *http.Client { return p.hc }

// The probe budget caps the probes of healthy clusters across the fleet:
// four clusters with a 50 ms interval and a budget of 2 probes a second are
// probed about twice a second in all, not eighty times; and they are still
// probed.
func TestProbeBudgetStretchesTheInterval(t *testing.T) {
	const clusters, budget = 4, 2
	tr := newHolder()
	e := serveEngine(t, fleet.Options{Health: fleet.HealthOptions{Interval: 50 * time.Millisecond, Timeout: time.Second, MaxProbesPerSecond: budget},
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}, tr)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	var probes atomic.Int64
	for i := range clusters {
		cl := running(t, 1)
		base := cl.GetHTTPClient()
		hc := *base
		hc.Transport = countingTransport{rt: base.Transport, n: &probes}
		counted := probeCounter{Cluster: cl, hc: &hc, n: &probes}
		name := fmt.Sprintf("budget-%d", i)
		if err := e.Engage(ctx, name, counted); err != nil {
			t.Fatal(err)
		}
		fleettest.Eventually(t, 30*time.Second, engagedWith(tr, name, counted))
	}

	// Still probed: every cluster within its stretched interval (2 s).
	from := probes.Load()
	fleettest.Eventually(t, 30*time.Second, func() error {
		if n := probes.Load() - from; n < clusters {
			return fmt.Errorf("%d probes so far, want %d", n, clusters)
		}
		return nil
	})
	// At most the budget's rate, plus one probe per cluster in flight at
	// the window's start; without the budget, 80 a second.
	from, start := probes.Load(), time.Now()
	fleettest.Consistently(t, 2*time.Second, func() error {
		limit := int64(time.Since(start).Seconds()*budget) + 2*clusters
		if n := probes.Load() - from; n > limit {
			return fmt.Errorf("%d probes in %s, want at most %d (budget %d a second)", n, time.Since(start).Round(time.Millisecond), limit, budget)
		}
		return nil
	})
}

// The budget is shared from the start between every cluster the engine
// runs, starting ones included: a cluster engaged first while the rest of a
// large fleet still syncs is not probed at the rate of a small fleet (which
// at start-up, when the API servers are busiest, is what 10,000 clusters
// did).
func TestProbeBudgetCountsClustersStillStarting(t *testing.T) {
	const starting, budget = 9, 2
	tr := newHolder()
	e := serveEngine(t, fleet.Options{Health: fleet.HealthOptions{Interval: 50 * time.Millisecond, Timeout: time.Second, MaxProbesPerSecond: budget}}, tr)
	for i := range starting {
		e.SetMember(fleet.Member{Name: multicluster.ClusterName(fmt.Sprintf("syncing-%d", i)), Hash: "1",
			Build: func(ctx context.Context) (cluster.Cluster, error) {
				<-ctx.Done() // still building until the engine stops
				return nil, ctx.Err()
			}})
	}
	fleettest.Eventually(t, 30*time.Second, func() error {
		for _, st := range e.Clusters() {
			if st.State != fleet.StateStarting {
				return fmt.Errorf("%s is %s, want starting", st.Name, st.State)
			}
		}
		return nil
	})

	var probes atomic.Int64
	cl := running(t, 1)
	hc := *cl.GetHTTPClient()
	hc.Transport = countingTransport{rt: hc.Transport, n: &probes}
	counted := probeCounter{Cluster: cl, hc: &hc, n: &probes}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := e.Engage(ctx, "first", counted); err != nil {
		t.Fatal(err)
	}
	// Ten clusters at 2 probes a second: every 5 s each. Counting the
	// engaged one alone, it would be probed every 500 ms, 8 times in 4 s.
	from, start := probes.Load(), time.Now()
	fleettest.Consistently(t, 4*time.Second, func() error {
		limit := int64(time.Since(start).Seconds()*budget/(starting+1)) + 2
		if n := probes.Load() - from; n > limit {
			return fmt.Errorf("%d probes of the engaged cluster in %s, want at most %d: the budget was shared with the engaged cluster alone", n, time.Since(start).Round(time.Millisecond), limit)
		}
		return nil
	})
}
