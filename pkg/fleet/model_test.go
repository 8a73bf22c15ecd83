package fleet_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/go-logr/logr/testr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// The model checker drives the engine through random schedules of publish,
// remove, replace (built or pre-built), adopt, cancel, ownership flips, fence
// loss, start failures, refused engagements, late subscription and
// reconciles, and checks its invariants:
//
//   - no fence is released while a reconcile holds its cluster or the
//     cluster's cache runs (checked at every release);
//   - once the schedule is quiet, every member this replica owns is engaged
//     within a bound, with exactly the engaged instance held by every
//     subscriber, and no other cluster is held, fenced or running;
//   - a cluster the engine runs is engaged only while it runs: started once
//     (a cache cannot start twice) and not stopped; a pre-built cluster
//     stopped when it was handed away is not engaged again;
//   - the probe budget's count of clusters running here matches the records;
//   - at the end nothing is left: no record, no fence, no running cluster.
//
// A failing seed prints itself, with the schedule's last steps and the
// engine's log; rerun it alone with
// go test -run TestModel ./pkg/fleet/ -model.seed=N. -model.soak runs many
// more seeds and steps. Most failures depend on timing as well as on the
// seed (CI runs packages side by side): run several at once on a loaded
// machine, e.g. go test -c -race -o /tmp/fleet.test ./pkg/fleet/ and four
// of /tmp/fleet.test -test.run 'TestModel$' -test.count=10 -test.cpu=1,2,4
// in parallel; MODEL_DUMP_DIR=dir writes every goroutine's stack there when a
// seed fails.
var (
	modelSeed = flag.Uint64("model.seed", 0, "run the model checker with this seed only")
	modelSoak = flag.Bool("model.soak", false, "run the model checker for many seeds and long schedules")
)

func TestModel(t *testing.T) {
	seeds, steps := uint64(20), 300
	if *modelSoak {
		seeds, steps = 200, 2000
	}
	if *modelSeed != 0 {
		runModel(t, *modelSeed, steps)
		return
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		if !runModel(t, seed, steps) {
			return
		}
	}
}

// fakeCluster is a cluster whose Start blocks until its context ends, and
// whose cache is synced at once; it records whether it runs. As
// controller-runtime's, it starts once only: a second Start answers
// "informer already started" at once, and a cluster that stopped stays
// stopped.
type fakeCluster struct {
	cluster.Cluster // not called: any other method panics
	name            string
	fail            bool // Start fails at once
	running         *runningSet
	refuse          atomic.Bool // its next engagement is refused
	starts          atomic.Int32
	stopped         atomic.Bool
}

func (f *fakeCluster) refuseEngagement() bool { return f.refuse.CompareAndSwap(true, false) }

// runs reports whether the cluster was started and has not stopped.
func (f *fakeCluster) runs() bool { return f.starts.Load() > 0 && !f.stopped.Load() }

type syncedCache struct{ cache.Cache }

func (syncedCache) WaitForCacheSync(context.Context) bool { return true }

func (f *fakeCluster) GetCache() cache.Cache       { return syncedCache{} }
func (f *fakeCluster) GetHTTPClient() *http.Client { return nil }
func (f *fakeCluster) GetConfig() *rest.Config     { return nil }
func (f *fakeCluster) Start(ctx context.Context) error {
	if f.fail {
		return errors.New("start failed")
	}
	if f.starts.Add(1) > 1 {
		return errors.New("informer already started") // controller-runtime's words
	}
	f.running.add(f.name)
	defer f.running.done(f.name)
	<-ctx.Done()
	f.stopped.Store(true)
	return nil
}

// runningSet counts running clusters and held reconciles by name.
type runningSet struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *runningSet) add(name string)  { r.mu.Lock(); r.n[name]++; r.mu.Unlock() }
func (r *runningSet) done(name string) { r.mu.Lock(); r.n[name]--; r.mu.Unlock() }
func (r *runningSet) get(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[name]
}

// checkedFences wraps fenceService: every release checks that the cluster
// neither runs nor is held by a reconcile.
type checkedFences struct {
	*fenceService
	running, inflight *runningSet
	violations        atomic.Value // string
}

func (c *checkedFences) Acquire(ctx context.Context, name string) (context.Context, func(), error) {
	fenced, release, err := c.fenceService.Acquire(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	return fenced, func() {
		if n := c.running.get(name); n > 0 {
			c.violations.CompareAndSwap(nil, fmt.Sprintf("fence of %s released while %d of its clusters run", name, n))
		}
		if n := c.inflight.get(name); n > 0 {
			c.violations.CompareAndSwap(nil, fmt.Sprintf("fence of %s released while %d reconciles hold it", name, n))
		}
		release()
	}, nil
}

// lose ends a held fence as a renewal lapse would.
func (f *fenceService) lose(name string) {
	f.mu.Lock()
	cancel, ok := f.held[name]
	f.mu.Unlock()
	if ok {
		cancel(errors.New("lost"))
	}
}

func runModel(t *testing.T, seed uint64, steps int) (ok bool) {
	t.Helper()
	defer func() {
		if !ok {
			t.Logf("model checker failed with seed %d; rerun alone: go test -race -run TestModel ./pkg/fleet/ -model.seed=%d", seed, seed)
		}
	}()
	rng := rand.New(rand.NewPCG(seed, seed))
	trace := &modelLog{}
	defer func() {
		if !ok {
			t.Logf("seed %d: the last steps and engine log lines:\n%s", seed, trace.tail(400))
		}
	}()
	running, holds := &runningSet{n: map[string]int{}}, &runningSet{n: map[string]int{}}
	fences := &checkedFences{fenceService: newFenceService(), running: running, inflight: holds}
	e := fleet.New(fleet.Options{Admission: fences, MinBackoff: 2 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		Health: fleet.HealthOptions{Disabled: true}, DrainTimeout: 10 * time.Second, Logger: trace.logger(t, seed)})
	subs := []*holder{newHolder()}
	e.Subscribe(subs[0])
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = e.Start(ctx) }()
	var reconciles sync.WaitGroup
	defer func() {
		reconciles.Wait()
		stop()
		<-stopped
	}()

	names := []string{"a", "b", "c", "d", "e"}
	type source struct {
		adopted  *fakeCluster // nil: published
		prebuilt *fakeCluster // published pre-built (Member.Cluster)
		cancel   context.CancelFunc
	}
	model := map[string]*source{}
	hash := 0
	newCluster := func(name string) *fakeCluster {
		return &fakeCluster{name: name, running: running}
	}
	fail := func(format string, args ...any) bool {
		if dir := os.Getenv("MODEL_DUMP_DIR"); dir != "" {
			buf := make([]byte, 1<<24)
			buf = buf[:runtime.Stack(buf, true)]
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%d-%d.txt", seed, time.Now().UnixNano())), buf, 0o644)
		}
		t.Errorf("seed %d: "+format, append([]any{seed}, args...)...)
		return false
	}

	quiet := func(step int) error {
		if v := fences.violations.Load(); v != nil {
			return fmt.Errorf("step %d: %s", step, v)
		}
		// The probe budget's divisor counts the clusters this replica runs.
		runningHere := 0
		for _, st := range e.Clusters() {
			if fleet.RunsHere(st.State) {
				runningHere++
			}
		}
		if got := e.Running(); got != runningHere {
			return fmt.Errorf("step %d: the engine counts %d clusters running here, its records say %d", step, got, runningHere)
		}
		for _, name := range names {
			src := model[name]
			owned := fences.Owns(name)
			state, _ := e.State(name)
			cl, err := e.Get(name)
			if err == nil && src != nil && src.adopted == nil {
				// Engaged means running: a cluster the engine runs is engaged
				// only while its cache runs (started, and not stopped).
				if fc, ok := cl.(*fakeCluster); ok && !fc.runs() {
					return fmt.Errorf("step %d: %s engaged with a cluster that does not run (started %d times, stopped %v, the published pre-built one: %v)",
						step, name, fc.starts.Load(), fc.stopped.Load(), fc == src.prebuilt)
				}
			}
			switch {
			case src != nil && owned && src.prebuilt != nil && src.prebuilt.stopped.Load():
				// Stopped when it was handed away: a pre-built cluster cannot
				// run again, and is not engaged until its provider publishes
				// a new one.
				if err == nil {
					return fmt.Errorf("step %d: %s engaged with its stopped pre-built cluster", step, name)
				}
			case src != nil && owned:
				if err != nil {
					return fmt.Errorf("step %d: %s owned and wanted but %s: %v", step, name, state, err)
				}
				if src.adopted != nil && cl != src.adopted {
					return fmt.Errorf("step %d: %s engaged with another instance than the adopted one", step, name)
				}
				for i, h := range subs {
					if got := h.Engaged()[name]; got != cl {
						return fmt.Errorf("step %d: subscriber %d holds %p of %s, the engine engaged %p", step, i, got, name, cl)
					}
				}
			default:
				if err == nil {
					return fmt.Errorf("step %d: %s engaged although not wanted here (%s)", step, name, state)
				}
				for i, h := range subs {
					if got, ok := h.Engaged()[name]; ok {
						return fmt.Errorf("step %d: subscriber %d still holds %p of %s", step, i, got, name)
					}
				}
				if fences.holds(name) {
					return fmt.Errorf("step %d: fence of %s held although not wanted here", step, name)
				}
				if n := running.get(name); n > 0 {
					return fmt.Errorf("step %d: %d clusters of %s run although not wanted here", step, n, name)
				}
			}
		}
		return nil
	}

	for step := range steps {
		name := names[rng.IntN(len(names))]
		src := model[name]
		switch op := rng.IntN(100); {
		case op < 20: // publish or replace
			if src != nil && src.adopted != nil {
				break
			}
			hash++
			failFirst := rng.IntN(5) == 0
			var builds atomic.Int32
			e.SetMember(fleet.Member{Name: name, Hash: fmt.Sprint(hash), Build: func(context.Context) (cluster.Cluster, error) {
				cl := newCluster(name)
				cl.fail = failFirst && builds.Add(1) == 1
				return cl, nil
			}})
			trace.add("step %d: publish %s (hash %d, first start fails: %v)", step, name, hash, failFirst)
			model[name] = &source{}
		case op < 25: // publish or replace with a pre-built cluster, maybe refused once
			if src != nil && src.adopted != nil {
				break
			}
			hash++
			cl := newCluster(name)
			cl.refuse.Store(rng.IntN(3) == 0)
			e.SetMember(fleet.Member{Name: name, Hash: fmt.Sprint(hash), Cluster: cl})
			trace.add("step %d: publish %s pre-built %p (hash %d, refused once: %v)", step, name, cl, hash, cl.refuse.Load())
			model[name] = &source{prebuilt: cl}
		case op < 30: // remove
			trace.add("step %d: remove %s", step, name)
			e.RemoveMember(name)
			if src != nil && src.cancel != nil {
				src.cancel()
			}
			delete(model, name)
		case op < 45: // adopt, or adopt a replacement
			if src != nil && src.adopted == nil {
				break
			}
			cl := newCluster(name)
			actx, cancel := context.WithCancel(context.Background())
			trace.add("step %d: adopt %s %p", step, name, cl)
			if src != nil && rng.IntN(2) == 0 {
				trace.add("step %d: cancel the adopted %s first", step, name)
				src.cancel() // cancel the old one, then replace at once
			}
			if err := e.Engage(actx, name, cl); err != nil {
				cancel()
				return fail("step %d: Engage(%s): %v", step, name, err)
			}
			if src != nil && src.adopted != nil && rng.IntN(2) == 0 {
				trace.add("step %d: cancel the previously adopted %s", step, name)
				src.cancel()
			}
			model[name] = &source{adopted: cl, cancel: cancel}
		case op < 50: // the provider's context of an adopted cluster ends
			if src != nil && src.adopted != nil {
				trace.add("step %d: the adopted %s's context ends", step, name)
				src.cancel()
				delete(model, name)
			}
		case op < 60: // ownership flips
			fences.setOwns(name, !fences.Owns(name))
			trace.add("step %d: %s owned: %v", step, name, fences.Owns(name))
		case op < 65: // fence lost to a renewal lapse
			trace.add("step %d: the fence of %s is lost", step, name)
			fences.lose(name)
		case op < 67: // a runnable subscribes late
			if len(subs) < 4 {
				h := newHolder()
				subs = append(subs, h)
				e.Subscribe(h)
				trace.add("step %d: subscriber %d subscribed", step, len(subs)-1)
			}
		default: // a reconcile
			length := time.Duration(rng.IntN(3)) * time.Millisecond
			reconciles.Go(func() {
				engaged, done, ok := e.Hold(name)
				if !ok {
					return
				}
				holds.add(name)
				trace.add("step %d: a reconcile holds %s", step, name)
				select {
				case <-engaged.Done():
				case <-time.After(length):
				}
				holds.done(name)
				done()
			})
		}
		if step%50 == 49 || step == steps-1 {
			if err := waitFor(10*time.Second, func() error { return quiet(step) }); err != nil {
				return fail("%v\nclusters: %v", err, e.Clusters())
			}
		}
	}

	// Everything goes: nothing may be left.
	for _, name := range names {
		e.RemoveMember(name)
		if src := model[name]; src != nil && src.cancel != nil {
			src.cancel()
		}
	}
	model = map[string]*source{}
	err := waitFor(10*time.Second, func() error {
		if err := quiet(steps); err != nil {
			return err
		}
		if cls := e.Clusters(); len(cls) > 0 {
			return fmt.Errorf("records left: %v", cls)
		}
		return nil
	})
	if err != nil {
		return fail("after removing everything: %v", err)
	}
	if v := fences.violations.Load(); v != nil {
		return fail("%s", v)
	}
	return true
}

// modelLog keeps the engine's log and the schedule's steps of one seed, to
// print the tail of when the seed fails: a failure under load rarely
// reproduces alone.
type modelLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *modelLog) add(format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *modelLog) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	from := max(0, len(l.lines)-n)
	return strings.Join(l.lines[from:], "\n")
}

// logger logs the engine's transitions into l, and to the test when one
// seed runs verbosely.
func (l *modelLog) logger(t *testing.T, seed uint64) logr.Logger {
	if *modelSeed == seed && testing.Verbose() {
		return testr.New(t)
	}
	return funcr.New(func(prefix, args string) { l.add("%s %s", prefix, args) }, funcr.Options{})
}

// waitFor polls cond until it returns nil or timeout passes.
func waitFor(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var _ multicluster.Aware = &holder{}
