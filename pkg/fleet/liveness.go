package fleet

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/internal/watchlive"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// DefaultWatchSilence is the default of HealthOptions.WatchSilence: three
// bookmark intervals of the API server's watch cache, which sends every
// watch that asks for them (client-go's informers do) a bookmark about once
// a minute even when nothing changes.
const DefaultWatchSilence = 3 * time.Minute

// WatchSilentError is the error of a probe that found every watch of an
// engaged cluster silent (no event, no bookmark) for longer than
// HealthOptions.WatchSilence while its API server answered /readyz: the
// cluster looks healthy and its controllers hear nothing of it. It counts
// as a failed probe; Member.Report hears of it once per silence.
type WatchSilentError struct {
	// Cluster whose watches are silent.
	Cluster multicluster.ClusterName
	// Silent is how long no watch of the cluster had received anything.
	Silent time.Duration
	// Bound is HealthOptions.WatchSilence.
	Bound time.Duration
}

func (e *WatchSilentError) Error() string {
	return fmt.Sprintf("cluster %q: every watch silent for %s (no event, no bookmark; bound %s) while /readyz answers",
		e.Cluster, e.Silent.Round(time.Second/10), e.Bound)
}

// liveness judges engaged clusters on their watches (see
// HealthOptions.WatchSilence): a probe whose /readyz (and Check) succeeded
// asks the cluster's watchlive.Tracker how long its watches have been
// silent. Clusters that do not follow their watches (see watchlive.Source)
// are never judged so.
type liveness struct {
	e     *Engine
	bound time.Duration // 0: off
	// silent holds the records found silent and not yet heard of since,
	// with the instance found so: a silence lasts while the same instance
	// stays silent. Guarded by the engine's lock; n is its length, so that
	// a probe of a fleet without silence takes no lock.
	silent map[*record]*instance
	n      atomic.Int32
}

func (l *liveness) init(e *Engine) {
	l.e, l.silent = e, map[*record]*instance{}
	if b := e.opts.Health.WatchSilence; b > 0 {
		l.bound = b
	}
}

// check judges j's cluster, once its API server answered.
func (l *liveness) check(j probeJob) (probeResult, error) {
	if l.bound == 0 {
		return probeOK, nil
	}
	if v := j.rec.view.Load(); v.state != StateEngaged || v.probe != j.in {
		return probeOK, nil // only an engaged cluster watches
	}
	d, watched := watchlive.Of(j.in.cl).Silence()
	if !watched || d <= l.bound {
		if l.n.Load() != 0 {
			l.heard(j)
		}
		return probeOK, nil
	}
	err := &WatchSilentError{Cluster: j.rec.name, Silent: d, Bound: l.bound}
	l.found(j, err)
	return probeFailed, err
}

// found records that j's cluster is silent: the first probe of a silence
// logs it, counts it and reports it (an Event, by the provider); every
// probe sets its multicluster_cluster_watch_silent_seconds.
func (l *liveness) found(j probeJob, err *WatchSilentError) {
	e, rec := l.e, j.rec
	e.mu.Lock()
	if rec.gone || rec.cur != j.in || !runsHere(rec.state) {
		e.mu.Unlock()
		return
	}
	was, ok := l.silent[rec]
	first := !ok || was != j.in
	if !ok {
		l.n.Add(1)
	}
	l.silent[rec] = j.in
	series := e.health.series.Admit(rec.name)
	if series {
		metrics.WatchSilentSeconds.WithLabelValues(rec.name).Set(err.Silent.Seconds())
		if first {
			metrics.WatchSilences.WithLabelValues(rec.name).Inc()
		}
	}
	var report func(error)
	if first {
		report = j.in.member.Report
	}
	e.mu.Unlock()
	if !first {
		return
	}
	e.log.Info("Every watch of the cluster is silent while its API server answers: its probes fail until they deliver again, and after FailureThreshold such probes it is disconnected and engaged again, its watches restarted",
		"cluster", rec.name, "silentFor", err.Silent.Round(time.Second).String(), "bound", l.bound.String(), "failureThreshold", e.opts.Health.FailureThreshold)
	if report != nil {
		e.wg.Go(func() { report(err) })
	}
}

// heard ends the silence of j's cluster, if it was silent: its watches
// deliver again, or it was engaged again since.
func (l *liveness) heard(j probeJob) {
	e, rec := l.e, j.rec
	e.mu.Lock()
	defer e.mu.Unlock()
	was, ok := l.silent[rec]
	if !ok {
		return
	}
	delete(l.silent, rec)
	l.n.Add(-1)
	if !rec.gone && runsHere(rec.state) && e.health.series.Admit(rec.name) {
		metrics.WatchSilentSeconds.WithLabelValues(rec.name).Set(0)
	}
	if was == j.in {
		e.log.Info("The cluster's watches deliver again", "cluster", rec.name)
	}
}

// forgetLocked drops rec, gone or run elsewhere now; under the engine's lock.
func (l *liveness) forgetLocked(rec *record) {
	if _, ok := l.silent[rec]; ok {
		delete(l.silent, rec)
		l.n.Add(-1)
	}
}

// releaseWatchSeries drops the cluster's series of watch silence.
func releaseWatchSeries(name multicluster.ClusterName) {
	metrics.WatchSilences.DeleteLabelValues(name)
	metrics.WatchSilentSeconds.DeleteLabelValues(name)
}
