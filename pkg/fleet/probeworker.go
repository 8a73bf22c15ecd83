package fleet

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/redact"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// probeJob is one probe of a record's instance.
type probeJob struct {
	rec *record
	in  *instance
}

// answerFunc records the answer of a probe that started at start.
type answerFunc func(rec *record, in *instance, start time.Time, res probeResult, err error)

// probeWorkers run the probes handed to them until ctx ends.
//
// A round's probes are queued at once and the idle workers woken once each:
// a worker takes probe after probe from the queue without a hand-over per
// probe, so that a round of a thousand probes costs about as many wake-ups
// as there are workers, not two per probe.
type probeWorkers struct {
	ctx     context.Context
	timeout time.Duration
	answer  answerFunc
	check   func(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error
	readyz  bool          // probe /readyz (unless Check alone decides)
	live    *liveness     // judges the cluster's watches once it answered (nil: not)
	wake    chan struct{} // one token per idle worker to wake; never blocks
	mu      sync.Mutex
	queue   []probeJob     // handed over, not yet taken
	wg      sync.WaitGroup // the workers that still answer for their probes
}

func newProbeWorkers(ctx context.Context, n int, h HealthOptions, answer answerFunc) *probeWorkers {
	return &probeWorkers{ctx: ctx, timeout: h.Timeout, answer: answer, wake: make(chan struct{}, n),
		check: h.Check, readyz: h.Check == nil || !h.SkipReadyz}
}

// hand queues probes for the workers and wakes as many as there are probes
// (at most all of them).
func (w *probeWorkers) hand(probes []probeJob) {
	if len(probes) == 0 {
		return
	}
	w.mu.Lock()
	w.queue = append(w.queue, probes...)
	w.mu.Unlock()
	for range min(len(probes), cap(w.wake)) {
		select {
		case w.wake <- struct{}{}:
		default:
			// Full: as many tokens wait as there are workers to take them,
			// and a worker looks at the queue before it waits.
			return
		}
	}
}

// take returns the next probe, if any.
func (w *probeWorkers) take() (probeJob, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) == 0 {
		return probeJob{}, false
	}
	j := w.queue[0]
	w.queue[0] = probeJob{}
	w.queue = w.queue[1:]
	if len(w.queue) == 0 {
		w.queue = w.queue[:0:0] // let the round's array go
	}
	return j, true
}

func (w *probeWorkers) spawn() {
	w.wg.Add(1)
	go w.run()
}

func (w *probeWorkers) run() {
	p := newProber(w)
	defer p.close()
	for {
		if w.ctx.Err() != nil {
			w.wg.Done()
			return
		}
		j, ok := w.take()
		if !ok {
			select {
			case <-w.ctx.Done():
				w.wg.Done()
				return
			case <-w.wake:
				continue
			}
		}
		if !p.probe(j) {
			return
		}
	}
}

// prober is one worker's probe in flight and its one timer. At the probe's
// timeout the timer cancels the request; the credentials the request needs
// may come from an exec plugin, which client-go runs without a bound, so a
// quarter of the timeout later the same timer answers the probe as failed
// if the request has still not returned, and another worker takes this
// one's place; this one ends once the request returns.
type prober struct {
	w     *probeWorkers
	timer *time.Timer
	stop  func() bool // unregisters the cancellation at ctx's end

	mu        sync.Mutex // guards the fields below
	running   bool       // a probe is in flight and nobody answered it yet
	cancelled bool       // its request was cancelled
	job       probeJob
	pctx      *probeCtx
	start     time.Time
	deadline  time.Time
}

func newProber(w *probeWorkers) *prober {
	p := &prober{w: w}
	p.timer = time.AfterFunc(time.Hour, p.fire)
	p.timer.Stop()
	// The engine stops: the probe in flight returns at once.
	p.stop = context.AfterFunc(w.ctx, func() {
		p.mu.Lock()
		if p.running && !p.cancelled {
			p.cancelled = true
			p.pctx.cancel(w.ctx.Err())
		}
		p.mu.Unlock()
	})
	return p
}

func (p *prober) close() {
	p.stop()
	p.timer.Stop()
}

// probe runs one probe and reports whether the worker goes on.
func (p *prober) probe(j probeJob) bool {
	w := p.w
	start := time.Now()
	req, rt, err := probeRequest(w.ctx, j.in)
	if err != nil {
		w.answer(j.rec, j.in, start, probeFailed, err)
		return true
	}
	ctx := req.Context().(*probeCtx)
	p.mu.Lock()
	p.running, p.cancelled = true, false
	p.job, p.pctx, p.start, p.deadline = j, ctx, start, start.Add(w.timeout)
	p.timer.Reset(w.timeout)
	if w.ctx.Err() != nil {
		p.cancelled = true
		ctx.cancel(w.ctx.Err())
	}
	p.mu.Unlock()

	res := probeOK
	if w.readyz {
		res, err = readyz(req, rt, w.timeout)
	}
	if res == probeOK && w.check != nil {
		res, err = check(ctx, j, w.check)
	}
	if res == probeOK && w.live != nil {
		res, err = w.live.check(j)
	}

	p.mu.Lock()
	answered := !p.running
	p.running = false
	p.job, p.pctx = probeJob{}, nil
	p.timer.Stop()
	p.mu.Unlock()
	if answered {
		return false // the timer answered for it and replaced this worker
	}
	w.answer(j.rec, j.in, start, res, err)
	return true
}

// check runs the user's health check of j's cluster (HealthOptions.Check).
func check(ctx context.Context, j probeJob, f func(context.Context, multicluster.ClusterName, cluster.Cluster) error) (probeResult, error) {
	err := f(ctx, j.rec.name, j.in.cl)
	switch {
	case err == nil:
		return probeOK, nil
	case ctx.Err() != nil:
		return probeFailed, fmt.Errorf("health check: no answer in time: %w", redact.Err(err))
	case apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err):
		return probeUnauthorized, fmt.Errorf("health check: %w", redact.Err(err))
	}
	return probeFailed, fmt.Errorf("health check: %w", redact.Err(err))
}

// fire runs when the timer goes off: it may be late for a probe that
// already ended, or early for the next one (a Reset racing with it), so it
// looks at the time.
func (p *prober) fire() {
	w := p.w
	p.mu.Lock()
	if !p.running {
		p.mu.Unlock()
		return
	}
	now := time.Now()
	if !p.cancelled {
		if now.Before(p.deadline) {
			p.timer.Reset(p.deadline.Sub(now))
			p.mu.Unlock()
			return
		}
		p.cancelled = true
		p.pctx.cancel(context.DeadlineExceeded)
		p.timer.Reset(w.timeout / 4)
		p.mu.Unlock()
		return
	}
	if hung := p.deadline.Add(w.timeout / 4); now.Before(hung) {
		p.timer.Reset(hung.Sub(now))
		p.mu.Unlock()
		return
	}
	// The request ignores its cancellation: answer for it.
	p.running = false
	j, start := p.job, p.start
	p.job, p.pctx = probeJob{}, nil
	p.mu.Unlock()
	w.answer(j.rec, j.in, start, probeFailed, fmt.Errorf("/readyz: no answer within %s", w.timeout))
	if w.ctx.Err() == nil {
		w.spawn()
	}
	w.wg.Done()
}

// probeCtx is the context of an instance's probes: its values are the
// engine's, it has no deadline of its own (the prober cancels it at the
// probe's timeout, and so do the workers when the engine stops), and it
// serves probe after probe until one cancels it. A cancelled probeCtx stays
// cancelled; the next probe gets a new one.
//
// It is the standard library's own cancelCtx, so that the contexts round
// trippers derive from a request's (pkg/clusters bounds every request)
// register with it rather than start a goroutine each to watch it.
type probeCtx struct {
	context.Context
	cancel context.CancelCauseFunc
}

func newProbeCtx(parent context.Context) *probeCtx {
	// Without the engine's cancellation: a context registered with the
	// engine's would stay registered as long as its instance lives.
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	return &probeCtx{Context: ctx, cancel: cancel}
}
