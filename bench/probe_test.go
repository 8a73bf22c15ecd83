package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
)

// BenchmarkProbeCost measures what health probes cost: 1,000 engaged
// clusters (on one real API server) probed at the default interval, the
// process's CPU time over three intervals with probes on, beside the same
// fleet with probes off in the same run. Reported as a share of one core,
// as CPU per probe, and as the share of one core that CPU per probe makes at
// 10,000 clusters, with the default probe budget and without it.
//
// The clusters are built by pkg/clusters, each with one watch open, so that
// every probe also judges the cluster's watches (HealthOptions.WatchSilence).
// The same fleet is probed a third time with that judgement off: the
// "-reference" figures, measured in the same run, and the difference,
// "cpu-µs/probe-liveness", what following the watches adds per probe, also
// given per cluster per minute at 10,000 clusters with the default budget.
//
// PROBE_INTERVAL=1s probes the same fleet ten times as often: the rate of
// 10,000 clusters at the default interval, for a profile of the probe path
// under that load (go test -bench ProbeCost -cpuprofile).
func BenchmarkProbeCost(b *testing.B) {
	const n = 1000
	interval := fleet.DefaultProbeInterval
	if v := os.Getenv("PROBE_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("PROBE_INTERVAL=%q: %v", v, err)
		}
		interval = d
	}
	window := max(3*interval, 30*time.Second)
	measure := func(disabled, liveness bool) (cpu time.Duration, probes float64) {
		silence := time.Duration(-1) // off
		if liveness {
			silence = 0 // the default
		}
		runtime.GC() // the previous fleet's garbage is not this one's
		eng := fleet.New(fleet.Options{Health: fleet.HealthOptions{Interval: interval, Disabled: disabled, WatchSilence: silence}})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- eng.Start(ctx) }()
		defer func() { cancel(); <-done }()
		before := histogramCount()
		for i := range n {
			// A connection of its own, as distinct clusters have: client-go
			// shares one transport, and so one HTTP/2 connection whose
			// reads serve many probes at once, among clusters of the same
			// server and credentials, unless the config has a Proxy.
			cfg := config()
			cfg.Proxy = http.ProxyFromEnvironment
			cl, err := pkgclusters.NewCluster(cfg)
			if err != nil {
				b.Fatal(err)
			}
			// One watch open, as an informer holds: the cluster has been
			// heard from, and its probes judge how long ago.
			watchOne(ctx, b, cl)
			// Adopted clusters: the engine probes them; nothing else runs for them.
			if err := eng.Engage(ctx, fmt.Sprintf("probe-cost-%d", i), cl); err != nil {
				b.Fatal(err)
			}
		}
		// Let a first round of probes open the connections (a TLS handshake
		// each), then measure.
		time.Sleep(interval + time.Second)
		for wait := time.Now().Add(2 * time.Minute); !disabled && histogramCount()-before < n && time.Now().Before(wait); {
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(time.Second)
		count0 := histogramCount()
		cpu0 := processCPU()
		time.Sleep(window)
		return processCPU() - cpu0, histogramCount() - count0
	}
	b.ResetTimer()
	off, _ := measure(true, false)
	// With the judgement first. The order decides the sign of the
	// difference on a loaded machine: the fleet measured last costs more
	// (docs/advanced/performance.md#watch-liveness); the check itself is
	// measured by fleet.BenchmarkWatchLivenessCheck.
	on, probes := measure(false, true)
	ref, refProbes := measure(false, false)
	b.StopTimer()
	share := func(d time.Duration) float64 { return 100 * d.Seconds() / window.Seconds() }
	b.ReportMetric(share(on), "%core-probes-on")
	b.ReportMetric(share(off), "%core-probes-off")
	b.ReportMetric(share(on)-share(off), "%core-probing")
	b.ReportMetric(share(ref)-share(off), "%core-probing-reference")
	b.ReportMetric(probes/window.Seconds(), "probes/s")
	// CPU per probe holds still when the machine is loaded and probes fall
	// behind their interval. At 10,000 clusters the default probe budget
	// stretches the interval (fleet.HealthOptions.IntervalAt); without it, a
	// thousand probes a second would cost a thousand times as much.
	perProbe := (on - off).Seconds() / max(probes, 1)
	refPerProbe := (ref - off).Seconds() / max(refProbes, 1)
	at10000 := fleet.HealthOptions{}.IntervalAt(10000)
	b.ReportMetric(perProbe*1e6, "cpu-µs/probe")
	b.ReportMetric(refPerProbe*1e6, "cpu-µs/probe-reference")
	b.ReportMetric((perProbe-refPerProbe)*1e6, "cpu-µs/probe-liveness")
	// CPU per cluster per minute at 10,000 clusters: a probe every at10000.
	perMinute := func(perProbe float64) float64 { return perProbe * 1e6 * time.Minute.Seconds() / at10000.Seconds() }
	b.ReportMetric(perMinute(perProbe), "cpu-µs/cluster/min-at-10000")
	b.ReportMetric(perMinute(refPerProbe), "cpu-µs/cluster/min-at-10000-reference")
	b.ReportMetric(100*perProbe*10000/at10000.Seconds(), "%core-at-10000")
	b.ReportMetric(100*perProbe*10000/fleet.DefaultProbeInterval.Seconds(), "%core-at-10000-unbudgeted")
}

// watchOne opens a watch of namespaces through cl's HTTP client and drains
// it until ctx ends.
func watchOne(ctx context.Context, b *testing.B, cl cluster.Cluster) {
	b.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cl.GetConfig().Host, "/")+"/api/v1/namespaces?watch=true&allowWatchBookmarks=true", nil)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := cl.GetHTTPClient().Do(req)
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("watch: %s", resp.Status)
	}
	go func() {
		defer func() { _ = resp.Body.Close() }()
		_, _ = io.Copy(io.Discard, resp.Body)
	}()
}

func histogramCount() float64 {
	ch := make(chan prometheus.Metric, 1)
	metrics.ProbeDuration.Collect(ch)
	m := <-ch
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		return 0
	}
	return float64(out.GetHistogram().GetSampleCount())
}
