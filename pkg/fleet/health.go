package fleet

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
)

// runProbes is the one scheduler of health probes: each tick it starts the
// probes that are due, at most MaxConcurrentProbes at a time, each on a
// short-lived goroutine; no goroutine waits per cluster. between runs before
// each round. It returns when ctx ends.
func (e *Engine) runProbes(ctx context.Context, between func()) {
	tick := min(time.Second, e.opts.Health.Interval/2, e.opts.MinBackoff)
	tick = max(tick, 10*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	slots := make(chan struct{}, e.opts.MaxConcurrentProbes)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		between()
		if e.opts.Health.Disabled {
			continue
		}
		type due struct {
			rec *record
			in  *instance
		}
		var probes []due
		now := time.Now()
		e.mu.Lock()
		for _, rec := range e.records {
			in := rec.cur
			if in == nil || rec.probing || now.Before(rec.nextProbe) {
				continue
			}
			if rec.state != StateEngaged && rec.state != StateDisconnected {
				continue
			}
			rec.probing = true
			probes = append(probes, due{rec, in})
		}
		e.mu.Unlock()
		// Every due probe runs this round, at most MaxConcurrentProbes at once.
		for i, p := range probes {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				e.mu.Lock()
				for _, q := range probes[i:] {
					q.rec.probing = false
				}
				e.mu.Unlock()
				return
			}
			e.wg.Go(func() {
				defer func() { <-slots }()
				e.probe(ctx, p.rec, p.in)
			})
		}
	}
}

// probeResult classifies a probe.
type probeResult int

const (
	probeOK probeResult = iota
	probeFailed
	probeUnauthorized
)

// probe asks the cluster's /readyz. Every authenticated identity may read it
// (system:public-info-viewer), so it needs no RBAC beyond what controllers
// need; a 401 or 403 means the credentials are no longer accepted.
func (e *Engine) probe(ctx context.Context, rec *record, in *instance) {
	start := time.Now()
	res, err := readyz(ctx, in, e.opts.Health.Timeout)
	metrics.ProbeDuration.Observe(time.Since(start).Seconds())

	e.mu.Lock()
	rec.probing = false
	if rec.cur != in || e.records[rec.name] != rec {
		e.mu.Unlock()
		return
	}
	healthy := 0.0
	if res == probeOK {
		healthy = 1
	}
	if e.healthSeries.Admit(rec.name) {
		metrics.Healthy.WithLabelValues(rec.name).Set(healthy)
	}
	var refresh func()
	now := time.Now()
	switch {
	case res == probeOK && rec.state == StateDisconnected:
		rec.failures = 0
		rec.nextProbe = now.Add(e.opts.Health.Interval)
		e.log.Info("Cluster answers again", "cluster", rec.name)
		e.reconnectLocked(rec)
	case res == probeOK:
		rec.failures = 0
		rec.nextProbe = now.Add(e.opts.Health.Interval)
	default:
		rec.failures++
		log := e.log.WithValues("cluster", rec.name, "failures", rec.failures)
		if res == probeUnauthorized && rec.member != nil && rec.member.Refresh != nil {
			refresh = rec.member.Refresh
			log.Info("Cluster rejects its credentials; asking the provider for fresh ones", "error", err.Error())
		} else if rec.state == StateEngaged {
			log.Info("Cluster health probe failed", "error", err.Error())
		}
		if rec.state == StateEngaged && rec.failures >= e.opts.Health.FailureThreshold {
			e.disconnectLocked(rec, fmt.Sprintf("unhealthy: %d consecutive failed probes, last: %v", rec.failures, err))
		} else if rec.state == StateEngaged {
			rec.nextProbe = now.Add(e.opts.Health.Interval)
		} else {
			rec.backoff = min(max(2*rec.backoff, e.opts.MinBackoff), e.opts.MaxBackoff)
			rec.nextProbe = now.Add(rec.backoff)
		}
	}
	e.mu.Unlock()
	if refresh != nil {
		refresh()
	}
}

// disconnectLocked disengages rec's current instance from every subscriber
// and stops it if the engine built it; probes go on, with backoff, against
// the stopped instance's client.
func (e *Engine) disconnectLocked(rec *record, why string) {
	in := rec.cur
	e.transitionLocked(rec, StateDisconnected, why)
	rec.backoff = e.opts.MinBackoff
	rec.nextProbe = time.Now().Add(rec.backoff)
	if in.disengage != nil {
		metrics.Disengagements.WithLabelValues("unhealthy").Inc()
		in.disengage()
	}
	if in.built {
		in.stopRun()
	}
	// A replacement in flight carries on; a failed start retried with backoff
	// is superseded by the probes.
	if rec.retry != nil {
		rec.retry.Stop()
		rec.retry = nil
	}
}

// reconnectLocked brings a disconnected cluster back: built again if the
// engine built it, engaged again otherwise.
func (e *Engine) reconnectLocked(rec *record) {
	in := rec.cur
	if in.built && rec.member != nil {
		e.attemptLocked(rec)
		return
	}
	rec.gen++
	gen := rec.gen
	// The same cluster, run as before (by its provider, or by the engine when
	// the application started it): its stopped signal carries over, so that
	// its death is still noticed and a fence waits for it.
	again := &instance{cl: in.cl, hash: in.hash, member: in.member, run: in.run, stopRun: in.stopRun, stopped: in.stopped}
	rec.cur = again
	e.wg.Go(func() {
		if err := e.engage(rec, gen, again); err != nil {
			e.log.Error(err, "Failed to engage a cluster again after it recovered", "cluster", rec.name)
		}
	})
}

// readyz probes the cluster's /readyz with its own client.
func readyz(ctx context.Context, in *instance, timeout time.Duration) (probeResult, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cfg := in.cl.GetConfig()
	hc := in.cl.GetHTTPClient()
	if cfg == nil || hc == nil {
		return probeFailed, fmt.Errorf("cluster has no client to probe with")
	}
	host := strings.TrimSuffix(cfg.Host, "/")
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, host+"/readyz", nil)
	if err != nil {
		return probeFailed, err
	}
	// The request honours ctx, but the credentials it needs may come from an
	// exec plugin, which client-go runs without a bound: wait for the answer
	// no longer than the probe's timeout either way.
	type answer struct {
		resp *http.Response
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := hc.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
			_ = resp.Body.Close()
		}
		answered <- answer{resp, err}
	}()
	var resp *http.Response
	select {
	case a := <-answered:
		if a.err != nil {
			return probeFailed, a.err
		}
		resp = a.resp
	case <-ctx.Done():
		return probeFailed, fmt.Errorf("/readyz: no answer within %s", timeout)
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		return probeOK, nil
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return probeUnauthorized, fmt.Errorf("/readyz: %s", resp.Status)
	default:
		return probeFailed, fmt.Errorf("/readyz: %s", resp.Status)
	}
}
