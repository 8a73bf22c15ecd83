package sharding_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/sharding"
)

// clusterNames returns n cluster names.
func clusterNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("member-%02d", i)
	}
	return out
}

// interval is a span during which a replica held a cluster's fence.
type interval struct {
	replica, cluster string
	start, end       time.Time // end is zero while open
}

// recorder keeps every holding interval, to prove that none overlap.
type recorder struct {
	mu        sync.Mutex
	intervals []*interval
}

func (r *recorder) open(replica, cluster string, at time.Time) *interval {
	r.mu.Lock()
	defer r.mu.Unlock()
	iv := &interval{replica: replica, cluster: cluster, start: at}
	r.intervals = append(r.intervals, iv)
	return iv
}

func (r *recorder) close(iv *interval, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if iv.end.IsZero() {
		iv.end = at
	}
}

// closeAll closes every open interval of a replica at a time (a killed process).
func (r *recorder) closeAll(replica string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, iv := range r.intervals {
		if iv.replica == replica && iv.end.IsZero() {
			iv.end = at
		}
	}
}

// holders maps each cluster to the replicas holding it now.
func (r *recorder) holders() map[string][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]string{}
	for _, iv := range r.intervals {
		if iv.end.IsZero() {
			out[iv.cluster] = append(out[iv.cluster], iv.replica)
		}
	}
	return out
}

// checkNoOverlap fails the test if two replicas held one cluster at once.
func (r *recorder) checkNoOverlap(t testing.TB) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	by := map[string][]*interval{}
	for _, iv := range r.intervals {
		by[iv.cluster] = append(by[iv.cluster], iv)
	}
	for cluster, ivs := range by {
		sort.Slice(ivs, func(i, j int) bool { return ivs[i].start.Before(ivs[j].start) })
		for i := 1; i < len(ivs); i++ {
			prev, cur := ivs[i-1], ivs[i]
			if prev.end.IsZero() || cur.start.Before(prev.end) {
				t.Errorf("cluster %s: %s held it from %s while %s held it from %s to %v",
					cluster, cur.replica, cur.start.Format(time.StampMicro), prev.replica, prev.start.Format(time.StampMicro), prev.end.Format(time.StampMicro))
			}
		}
	}
}

// current returns each cluster's holder, or an error unless every cluster is
// held by exactly one replica (one of want, when given).
func (r *recorder) current(names []string, want ...string) (map[string]string, error) {
	h := r.holders()
	owners := map[string]string{}
	for _, n := range names {
		if len(h[n]) != 1 {
			return nil, fmt.Errorf("cluster %s held by %v", n, h[n])
		}
		if len(want) > 0 && !slices.Contains(want, h[n][0]) {
			return nil, fmt.Errorf("cluster %s held by %s, want one of %v", n, h[n][0], want)
		}
		owners[n] = h[n][0]
	}
	return owners, nil
}

// expectCoverage waits until every cluster is held by exactly one replica (one
// of want, when given).
func (r *recorder) expectCoverage(t testing.TB, names []string, timeout time.Duration, want ...string) map[string]string {
	t.Helper()
	var owners map[string]string
	fleettest.Eventually(t, timeout, func() (err error) {
		owners, err = r.current(names, want...)
		return err
	})
	return owners
}

// runEngine does what the manager's engine does with a coordinator: for every
// cluster this replica owns it acquires the fence, "runs" the cluster while the
// fence holds and ownership stays, then stops it and releases. It returns when
// ctx ends and every cluster is stopped. With noRelease set, a cluster whose fenced
// context ends is not released (a crashed process cannot release).
func runEngine(ctx context.Context, c *sharding.Coordinator, names []string, rec *recorder, noRelease *atomic.Bool) {
	type worker struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	workers := map[string]*worker{}
	// ended wakes the loop when a worker ends on its own (its fence ended), so
	// that the cluster is acquired again if this replica still owns it.
	ended := make(chan struct{}, 1)
	defer func() {
		for _, w := range workers {
			w.cancel()
			<-w.done
		}
	}()
	for {
		changed := c.Changed()
		for _, n := range names {
			w := workers[n]
			if w != nil {
				select {
				case <-w.done:
					delete(workers, n)
					w = nil
				default:
				}
			}
			owns := c.Owns(n)
			switch {
			case owns && w == nil:
				wctx, cancel := context.WithCancel(ctx)
				w = &worker{cancel: cancel, done: make(chan struct{})}
				workers[n] = w
				go func() {
					defer func() {
						close(w.done)
						select {
						case ended <- struct{}{}:
						default:
						}
					}()
					fenced, release, err := c.Acquire(wctx, n)
					if err != nil {
						return
					}
					iv := rec.open(c.Identity(), n, time.Now())
					select {
					case <-fenced.Done():
					case <-wctx.Done():
					}
					if noRelease != nil && noRelease.Load() {
						return // crashed: the interval was closed by the test
					}
					rec.close(iv, time.Now())
					release()
				}()
			case !owns && w != nil:
				w.cancel()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-ended:
		}
	}
}

// cuttable fails every request while cut is set: a replica cut off from the host.
type cuttable struct {
	rt  http.RoundTripper
	cut *atomic.Bool
}

func (c cuttable) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		return nil, errors.New("test: replica cut off from the host")
	}
	return c.rt.RoundTrip(r)
}

// replica is a coordinator with its simulated engine.
type replica struct {
	c         *sharding.Coordinator
	cut       atomic.Bool
	noRelease atomic.Bool
	stop      func()
}

var (
	groupsMu sync.Mutex
	groups   = map[string]string{}
)

// runGroup names a test's group uniquely, so that repeated runs (-count) on
// the same API server do not meet the Leases of earlier ones.
func runGroup(t testing.TB, group string) string {
	groupsMu.Lock()
	defer groupsMu.Unlock()
	key := fmt.Sprintf("%p/%s", t, group)
	if _, ok := groups[key]; !ok {
		groups[key] = fmt.Sprintf("%s-%d", group, len(groups))
	}
	return groups[key]
}

// timing are short lease timings for tests.
func timing(lease, renew, retry time.Duration) sharding.Options {
	return sharding.Options{LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry}
}

// startReplica starts a coordinator and its engine until the test ends or stop
// is called.
func startReplica(t testing.TB, group, id string, opts sharding.Options, names []string, rec *recorder) *replica {
	t.Helper()
	r := &replica{}
	cfg := rest.CopyConfig(host)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return cuttable{rt: rt, cut: &r.cut} })
	opts.Name, opts.Identity = runGroup(t, group), id
	if opts.Logger == nil {
		log := logr.Discard()
		opts.Logger = &log
	}
	c, err := sharding.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	wg.Go(func() { errs <- c.Start(ctx) })
	if names != nil {
		wg.Go(func() { runEngine(ctx, c, names, rec, &r.noRelease) })
	}
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			if err := <-errs; err != nil {
				t.Errorf("replica %s: %v", id, err)
			}
		})
	}
	t.Cleanup(r.stop)
	return r
}
