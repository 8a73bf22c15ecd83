package fleet

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/internal/redact"
)

// runProbes is the one scheduler of health probes: each tick it hands the
// probes that are due to MaxConcurrentProbes workers; no goroutine waits per
// cluster. It returns when ctx ends and every worker has stopped; with
// probing disabled it runs nothing.
//
// A round takes the due probes from the probe queue (earliest first) under
// the engine's read lock: reconcilers' Get never waits for it, and a round
// costs what is due, not the size of the fleet. The workers live as long as
// the engine: a probe goes deep into the HTTP client's stack, which a fresh
// goroutine per probe would grow (and copy) every time. A round's probes go
// to the workers at once (see probeWorkers): a probe's request wakes
// goroutines and threads, and probes in one burst share those wake-ups (4
// probes in flight cost about 1.4x the CPU per probe of 32).
func (h *health) runProbes(ctx context.Context, answer answerFunc) {
	if h.opts.Health.Disabled {
		<-ctx.Done()
		return
	}
	tick := min(time.Second, h.opts.Health.Interval/2, h.opts.MinBackoff)
	tick = max(tick, 10*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	w := newProbeWorkers(ctx, h.opts.MaxConcurrentProbes, h.opts.Health, answer)
	w.live = &h.live
	defer func() {
		w.wg.Wait()
		// Probes handed over but never started: due again once the engine
		// starts again.
		w.mu.Lock()
		h.queue.mu.Lock()
		for _, j := range w.queue {
			j.rec.probing = false
		}
		h.queue.mu.Unlock()
		w.queue = nil
		w.mu.Unlock()
	}()
	for range h.opts.MaxConcurrentProbes {
		w.spawn()
	}
	var probes []probeJob
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		probes = probes[:0]
		now := time.Now()
		h.queue.mu.Lock()
		h.queue.dueLocked(now, func(rec *record) {
			in := rec.view.Load().probe
			if in == nil {
				return // scheduled again when engaged or disconnected
			}
			if rec.probing {
				// Its last probe still runs (a timeout longer than the
				// interval): look again next round.
				h.queue.scheduleLocked(rec, now.Add(tick))
				return
			}
			rec.probing = true
			probes = append(probes, probeJob{rec, in})
		})
		h.queue.mu.Unlock()
		// Every due probe runs this round, at most MaxConcurrentProbes at once.
		w.hand(probes)
		clear(probes) // no record outlives its round here
	}
}

// probeInterval is the wait before the next probe of a healthy cluster:
// the configured interval, stretched by the probe budget
// (HealthOptions.MaxProbesPerSecond) when the fleet is large.
func (h *health) probeInterval() time.Duration {
	o := h.opts.Health
	d := o.intervalAt(int(h.running.Load()))
	if d > o.Interval && h.stretched.CompareAndSwap(false, true) {
		h.log.Info("Probing healthy clusters less often than the probe interval, to stay within the probe budget",
			"interval", o.Interval.String(), "stretchedTo", d.Round(time.Second).String(), "clusters", h.running.Load(), "maxProbesPerSecond", o.MaxProbesPerSecond)
	}
	return d
}

// health is the engine's probing: the probes to come, the per-cluster
// series of multicluster_cluster_healthy and the probe budget.
type health struct {
	opts      Options
	log       logr.Logger
	queue     probeQueue
	series    metrics.SeriesCap
	running   atomic.Int64 // records this replica runs (see runsHere): the probe budget's divisor
	stretched atomic.Bool  // the probe budget stretched the interval (logged once)
	live      liveness     // judges engaged clusters on their watches (liveness.go)
}

// probeResults are the labels of multicluster_cluster_probes_total, by
// probeResult.
var probeResults = [...]string{probeOK: "ok", probeFailed: "failed", probeUnauthorized: "unauthorized"}

// countProbe counts a probe's result in the cluster's series, if it has
// series; the counters are looked up once per cluster, not per probe.
func (h *health) countProbe(rec *record, res probeResult) {
	c := rec.probeCounters.Load()
	if c == nil {
		if !h.series.Admit(rec.name) {
			return
		}
		c = new([3]prometheus.Counter)
		for r, label := range probeResults {
			c[r] = metrics.Probes.WithLabelValues(rec.name, label)
		}
		rec.probeCounters.Store(c)
	}
	c[res].Inc()
}

// availabilityLocked writes the cluster's availability series at a
// transition from one state to another; under the engine's lock.
func (h *health) availabilityLocked(rec *record, from, to State, now time.Time) {
	if !runsHere(to) || !h.series.Admit(rec.name) {
		return
	}
	engaged := 0.0
	if to == StateEngaged {
		engaged = 1
	}
	metrics.Engaged.WithLabelValues(rec.name).Set(engaged)
	metrics.LastTransition.WithLabelValues(rec.name).Set(float64(now.UnixNano()) / 1e9)
	if from == StateDisconnected && !rec.since.IsZero() {
		metrics.DisconnectedSeconds.WithLabelValues(rec.name).Add(now.Sub(rec.since).Seconds())
	}
}

// successesNeeded returns the healthy answers in a row rec needs to be
// engaged again: SuccessThreshold, doubled for each disconnection beyond
// FlapThreshold within FlapWindow, up to 8 times.
func (h *health) successesNeeded(rec *record, now time.Time) int {
	need, recent := h.opts.Health.SuccessThreshold, 0
	for _, t := range rec.disconnects {
		if now.Sub(t) <= FlapWindow {
			recent++
		}
	}
	for extra := recent - FlapThreshold; extra >= 0 && need < 8*h.opts.Health.SuccessThreshold; extra-- {
		need *= 2
	}
	return need
}

// release drops the cluster's per-cluster series: it is gone, or run by
// another replica now.
func (h *health) release(rec *record) {
	rec.healthGauge.Store(0) // written again by the next probe, if any
	rec.probeCounters.Store(nil)
	h.live.forgetLocked(rec)
	if h.series.Release(rec.name) {
		releaseWatchSeries(rec.name)
		metrics.Healthy.DeleteLabelValues(rec.name)
		metrics.Engaged.DeleteLabelValues(rec.name)
		metrics.LastTransition.DeleteLabelValues(rec.name)
		metrics.DisconnectedSeconds.DeleteLabelValues(rec.name)
		for _, label := range probeResults {
			metrics.Probes.DeleteLabelValues(rec.name, label)
		}
	}
	if h.opts.OnRelease != nil {
		h.opts.OnRelease(rec.name)
	}
}

// probeResult classifies a probe.
type probeResult int

const (
	probeOK probeResult = iota
	probeFailed
	probeUnauthorized
)

// answer records the answer of a probe that started at start. A probe asks
// the cluster's /readyz: every authenticated identity may read it
// (system:public-info-viewer), so it needs no RBAC beyond what controllers
// need; a 401 or 403 means the credentials are no longer accepted.
func (e *Engine) answer(rec *record, in *instance, start time.Time, res probeResult, err error) {
	now := time.Now()
	err = redact.Known.ClusterErr(rec.name, err) // the member's words, before anything prints them
	metrics.ProbeDuration.Observe(now.Sub(start).Seconds())

	// The common answer, an engaged cluster still healthy, changes nothing
	// but the next probe's time: it takes no lock but the probe queue's.
	if v := rec.view.Load(); res == probeOK && v.state == StateEngaged && v.probe == in && rec.failures.Load() == 0 {
		rec.note.probed(now, now.Sub(start), res, nil)
		e.health.setHealthy(rec, 1)
		e.health.countProbe(rec, res)
		if rec.view.Load() != v {
			// It changed meanwhile: if it left this replica, its series,
			// released already, may just have been written again.
			e.mu.Lock()
			if rec.gone || !runsHere(rec.state) {
				e.health.release(rec)
			}
			e.mu.Unlock()
		}
		e.health.queue.mu.Lock()
		rec.probing = false
		e.health.queue.scheduleLocked(rec, now.Add(e.health.probeInterval()))
		e.health.queue.mu.Unlock()
		return
	}
	e.health.queue.mu.Lock()
	rec.probing = false
	e.health.queue.mu.Unlock()

	e.mu.Lock()
	if rec.cur != in || rec.gone {
		e.mu.Unlock()
		return
	}
	rec.note.probed(now, now.Sub(start), res, err)
	gauge := 0.0
	if res == probeOK {
		gauge = 1
	}
	e.health.setHealthy(rec, gauge)
	e.health.countProbe(rec, res)
	var refresh func()
	switch {
	case res == probeOK && rec.state == StateDisconnected:
		rec.failures.Store(0)
		rec.successes++
		need := e.health.successesNeeded(rec, now)
		if rec.successes < need {
			// Confirmed soon: a recovered cluster waits about a backoff per
			// answer it still needs, not a probe interval.
			e.health.queue.schedule(rec, now.Add(e.opts.MinBackoff))
			break
		}
		e.health.queue.schedule(rec, now.Add(e.health.probeInterval()))
		if !rec.answering {
			e.log.Info("Cluster answers again", "cluster", rec.name, "healthyAnswersInARow", rec.successes)
		}
		// Reconnected by the name's next step; an attempt on its way is
		// never cancelled by an answer.
		rec.answering = true
		e.kickLocked(rec)
	case res == probeOK:
		rec.failures.Store(0)
		e.health.queue.schedule(rec, now.Add(e.health.probeInterval()))
	default:
		failures := rec.failures.Add(1)
		rec.answering, rec.successes = false, 0
		log := e.log.WithValues("cluster", rec.name, "failures", failures)
		if res == probeUnauthorized && rec.member != nil && (rec.member.Refresh != nil || rec.conn != nil) {
			refresh = e.refresher(rec, rec.member.Refresh)
			log.Info("Cluster rejects its credentials; asking the provider for fresh ones", "error", err.Error())
		} else if rec.state == StateEngaged {
			log.Info("Cluster health probe failed", "error", err.Error())
		}
		switch {
		case rec.state == StateEngaged && int(failures) >= e.opts.Health.FailureThreshold:
			e.disconnectLocked(rec, fmt.Sprintf("unhealthy: %d consecutive failed probes, last: %v", failures, err))
		case rec.state == StateEngaged:
			// Outside the probe budget: few clusters fail at once, and a
			// failing one is given up on within FailureThreshold intervals.
			e.health.queue.schedule(rec, now.Add(e.opts.Health.Interval))
		default:
			rec.backoff = min(max(2*rec.backoff, e.opts.MinBackoff), e.opts.MaxBackoff)
			e.health.queue.schedule(rec, now.Add(rec.backoff))
		}
	}
	e.mu.Unlock()
	if refresh != nil {
		refresh()
	}
}

// setHealthy sets the cluster's multicluster_cluster_healthy to v, unless
// it holds v already: most probes change nothing, and the label lookup and
// the series cap's lock are most of what a probe costs besides its request.
// One probe of a record answers at a time.
func (h *health) setHealthy(rec *record, v float64) {
	mark := int32(v) + 1
	if rec.healthGauge.Load() == mark {
		return
	}
	if h.series.Admit(rec.name) {
		metrics.Healthy.WithLabelValues(rec.name).Set(v)
		rec.healthGauge.Store(mark)
	}
}

// probeRequest returns the request the next probe of in sends, and the
// round tripper to send it with. The request and its context (values from
// parent) serve every probe of the instance until one is cancelled: a
// healthy probe allocates nothing of its own. One probe of a record runs at
// a time (record.probing), so in.probeReq needs no lock.
func probeRequest(parent context.Context, in *instance) (*http.Request, http.RoundTripper, error) {
	hc := in.cl.GetHTTPClient()
	if hc == nil {
		return nil, nil, fmt.Errorf("cluster has no client to probe with")
	}
	// Straight to the client's transport (client-go's chain: credentials,
	// user agent, TLS): /readyz does not redirect and the probe has its own
	// deadline, so http.Client's redirect bookkeeping (a copy of the URL and
	// of the headers on every request) would be all it adds.
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	if req := in.probeReq; req != nil {
		if req.Context().Err() == nil {
			return req, rt, nil
		}
		// Its last probe was cancelled: a cancelled context stays so.
		in.probeReq = req.WithContext(newProbeCtx(parent))
		return in.probeReq, rt, nil
	}
	cfg := in.cl.GetConfig()
	if cfg == nil {
		return nil, nil, fmt.Errorf("cluster has no client to probe with")
	}
	host := strings.TrimSuffix(cfg.Host, "/")
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	req, err := http.NewRequestWithContext(newProbeCtx(parent), http.MethodGet, host+"/readyz", nil)
	if err != nil {
		return nil, nil, err
	}
	// The user agent client-go would set: with it set, client-go does not
	// copy the request to set it, on every probe.
	ua := cfg.UserAgent
	if ua == "" {
		ua = rest.DefaultKubernetesUserAgent()
	}
	req.Header.Set("User-Agent", ua)
	in.probeReq = req
	return req, rt, nil
}

// readyz sends req, a probe of the cluster's /readyz, with rt. The caller
// cancels req's context at the probe's timeout.
func readyz(req *http.Request, rt http.RoundTripper, timeout time.Duration) (probeResult, error) {
	resp, err := rt.RoundTrip(req)
	if err != nil {
		if req.Context().Err() != nil {
			return probeFailed, fmt.Errorf("/readyz: no answer within %s: %w", timeout, err)
		}
		return probeFailed, fmt.Errorf("/readyz: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
		return probeOK, nil
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return probeUnauthorized, fmt.Errorf("/readyz: %s", resp.Status)
	default:
		return probeFailed, fmt.Errorf("/readyz: %s", resp.Status)
	}
}
