package fleet

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// ReadLocked runs f while a reader is in the middle of reading the fleet,
// as a reconciler's Get or a scan of every record (readiness, listings) is:
// from within a scan of the records.
func (e *Engine) ReadLocked(f func()) {
	ran := false
	e.records.m.Range(func(_, _ any) bool {
		f()
		ran = true
		return false
	})
	if !ran {
		f()
	}
}

// NewProbe returns a function that probes cl's /readyz as the engine's
// probe workers do: one worker's timer, the instance's prepared request;
// only the engine's record keeping is left out.
func NewProbe(ctx context.Context, cl cluster.Cluster) (probe func() error, stop func()) {
	var res probeResult
	var err error
	w := newProbeWorkers(ctx, 1, HealthOptions{}.withDefaults(), func(_ *record, _ *instance, _ time.Time, r probeResult, e error) {
		res, err = r, e
	})
	p := newProber(w)
	j := probeJob{rec: &record{}, in: &instance{cl: cl}}
	return func() error {
		if !p.probe(j) {
			return fmt.Errorf("the probe hung")
		}
		if res != probeOK {
			return err
		}
		return nil
	}, p.close
}

// Running is the count of clusters the probe budget is shared between.
func (e *Engine) Running() int { return int(e.health.running.Load()) }

// RunsHere reports whether the budget counts a cluster in state s.
func RunsHere(s State) bool { return runsHere(s) }

// ProbeEntries is the number of entries in the probe queue, live or stale.
func (e *Engine) ProbeEntries() int {
	e.health.queue.mu.Lock()
	defer e.health.queue.mu.Unlock()
	return len(e.health.queue.h)
}
