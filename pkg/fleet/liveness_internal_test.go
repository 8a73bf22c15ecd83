package fleet

import (
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/internal/watchlive"
)

// followed is a cluster that follows its watches with tr.
type followed struct {
	cluster.Cluster
	tr *watchlive.Tracker
}

func (f followed) WatchLiveness() *watchlive.Tracker { return f.tr }

// engagedJob returns an engine and the probe job of an engaged cluster
// named name whose watches tr follows; reports counts Member.Report's calls
// with a *WatchSilentError.
func engagedJob(opts Options, name string, tr *watchlive.Tracker, reports *atomic.Int32) (*Engine, probeJob) {
	e := New(opts)
	in := &instance{cl: followed{tr: tr}, member: &Member{Name: name, Report: func(err error) {
		if silent := (*WatchSilentError)(nil); errors.As(err, &silent) {
			reports.Add(1)
		}
	}}}
	rec := &record{name: name, state: StateEngaged, cur: in}
	rec.view.Store(&view{state: StateEngaged, probe: in})
	return e, probeJob{rec: rec, in: in}
}

func TestASilenceIsReportedOnceAndEndsWhenTheWatchesDeliver(t *testing.T) {
	var tr watchlive.Tracker
	var reports atomic.Int32
	e, j := engagedJob(Options{Health: HealthOptions{WatchSilence: 20 * time.Millisecond}}, "live-unit", &tr, &reports)
	t.Cleanup(func() {
		e.mu.Lock()
		e.health.release(j.rec)
		e.mu.Unlock()
	})
	// Never watched: never silent.
	if res, err := e.health.live.check(j); res != probeOK {
		t.Fatalf("a cluster without watches failed its probe: %v", err)
	}
	_ = tr.Watch(io.NopCloser(strings.NewReader("")))
	silent := func() (probeResult, error) {
		var res probeResult
		var err error
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if res, err = e.health.live.check(j); res != probeOK {
				break
			}
		}
		return res, err
	}
	res, err := silent()
	var ws *WatchSilentError
	if res != probeFailed || !errors.As(err, &ws) || ws.Cluster != "live-unit" || ws.Silent <= ws.Bound {
		t.Fatalf("check of a silent cluster = %v, %v; want failed with a WatchSilentError", res, err)
	}
	// Every probe of the silence fails; the first one alone is reported.
	if res, _ := e.health.live.check(j); res != probeFailed {
		t.Fatal("a second probe of the silence passed")
	}
	e.wg.Wait()
	if got := reports.Load(); got != 1 {
		t.Fatalf("reported %d times, want once", got)
	}
	if got := testutil.ToFloat64(metrics.WatchSilences.WithLabelValues("live-unit")); got != 1 {
		t.Fatalf("multicluster_cluster_watch_silences_total = %v, want 1", got)
	}
	if got := testutil.ToFloat64(metrics.WatchSilentSeconds.WithLabelValues("live-unit")); got < 0.02 {
		t.Fatalf("multicluster_cluster_watch_silent_seconds = %v, want beyond the bound", got)
	}
	// A delivery ends it: the gauge goes back to 0, and the next silence is
	// a new one.
	_ = tr.Watch(io.NopCloser(strings.NewReader("")))
	if res, err := e.health.live.check(j); res != probeOK {
		t.Fatalf("a cluster just heard from failed its probe: %v", err)
	}
	if got := testutil.ToFloat64(metrics.WatchSilentSeconds.WithLabelValues("live-unit")); got != 0 {
		t.Fatalf("multicluster_cluster_watch_silent_seconds = %v once heard from, want 0", got)
	}
	if res, _ := silent(); res != probeFailed {
		t.Fatal("a second silence was not found")
	}
	e.wg.Wait()
	if got := reports.Load(); got != 2 {
		t.Fatalf("reported %d times after two silences, want 2", got)
	}
	// Released with the cluster.
	e.mu.Lock()
	e.health.release(j.rec)
	e.mu.Unlock()
	if metrics.WatchSilences.DeleteLabelValues("live-unit") || metrics.WatchSilentSeconds.DeleteLabelValues("live-unit") {
		t.Fatal("the cluster's series of silence were left after its release")
	}
	if e.health.live.n.Load() != 0 {
		t.Fatal("a released cluster is still counted silent")
	}
}

func TestANegativeWatchSilenceJudgesNoWatch(t *testing.T) {
	var tr watchlive.Tracker
	_ = tr.Watch(io.NopCloser(strings.NewReader("")))
	var reports atomic.Int32
	e, j := engagedJob(Options{Health: HealthOptions{WatchSilence: -1}}, "live-off", &tr, &reports)
	if e.health.live.bound != 0 {
		t.Fatalf("bound %s with WatchSilence negative", e.health.live.bound)
	}
	if res, err := e.health.live.check(j); res != probeOK {
		t.Fatalf("judged with WatchSilence off: %v", err)
	}
	if got := (HealthOptions{}).withDefaults().WatchSilence; got != DefaultWatchSilence {
		t.Fatalf("default WatchSilence %s, want %s", got, DefaultWatchSilence)
	}
}

// BenchmarkWatchLivenessCheck measures what judging a healthy cluster's
// watches adds to each of its probes.
func BenchmarkWatchLivenessCheck(b *testing.B) {
	var tr watchlive.Tracker
	_ = tr.Watch(io.NopCloser(strings.NewReader("")))
	var reports atomic.Int32
	e, j := engagedJob(Options{}, "live-bench", &tr, &reports)
	b.ReportAllocs()
	for b.Loop() {
		if res, err := e.health.live.check(j); res != probeOK {
			b.Fatal(err)
		}
	}
}
