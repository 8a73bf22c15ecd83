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
	"runtime/debug"
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
// loss, start failures, refused engagements, late subscription, reconciles
// (some of them descheduled between their look at the engagement and their
// hold, some not returning when their context ends), health probes through
// a stand-in API server (healthy, failing, 401, answers around the probe
// timeout), engagements slower than the probe interval (even seeds), and,
// on odd seeds, a shutdown under concurrent readers; it checks:
//
//   - no fence is released while a reconcile holds its cluster or the
//     cluster's cache runs (checked at every release): a reconcile of a
//     cluster the engine ran never runs unheld;
//   - once the schedule is quiet (every cluster answers), every member this
//     replica owns is engaged within a bound, even when engaging takes
//     several probe intervals, with exactly the engaged instance held by
//     every subscriber, and no other cluster is held, fenced or running;
//   - no reader (Get, Lookup, Hold, State, Changed, Joining, Clusters,
//     Ready) panics or sees an engaged cluster without one, during the
//     engine's shutdown or after it; after it nothing runs, no fence is held
//     and no subscriber holds a cluster;
//   - a cluster the engine runs is engaged only while it runs: started once
//     (a cache cannot start twice) and not stopped; the engine never stops
//     a pre-built cluster (which it did not build) while its member is
//     wanted: handed away or its fence lost, it keeps running, and is
//     engaged again when it comes back; once removed or replaced, it stops;
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
		if *modelSoak {
			t.Logf("seed %d of %d: %d steps passed", seed, seeds, steps)
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
	answers         *answers // how its /readyz answers; nil: it has no client
}

func (f *fakeCluster) refuseEngagement() bool { return f.refuse.CompareAndSwap(true, false) }

// runs reports whether the cluster was started and has not stopped.
func (f *fakeCluster) runs() bool { return f.starts.Load() > 0 && !f.stopped.Load() }

type syncedCache struct{ cache.Cache }

func (syncedCache) WaitForCacheSync(context.Context) bool { return true }

func (f *fakeCluster) GetCache() cache.Cache { return syncedCache{} }

// GetHTTPClient and GetConfig are what a probe uses: the model decides how
// the cluster answers (see answers).
func (f *fakeCluster) GetHTTPClient() *http.Client {
	if f.answers == nil {
		return nil
	}
	return &http.Client{Transport: f.answers}
}

func (f *fakeCluster) GetConfig() *rest.Config {
	if f.answers == nil {
		return nil
	}
	return &rest.Config{Host: "https://" + f.name}
}
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

// answer is how a cluster's /readyz answers the engine's probes.
type answer int32

const (
	answerHealthy      answer = iota
	answerFailing             // 500
	answerUnauthorized        // 401: the engine asks for fresh credentials
	answerSlow                // healthy, after a delay around the probe timeout
)

func (a answer) String() string {
	return [...]string{"healthy", "failing", "unauthorized", "slow"}[a]
}

// answers is the model's API server for every cluster: how each name's
// /readyz answers now. It is a RoundTripper, so that the engine's probes take
// their real path through the probe workers.
type answers struct {
	mu      sync.Mutex
	by      map[string]answer
	slow    time.Duration // the delay of a slow answer
	refresh atomic.Int32  // Member.Refresh calls
}

func (a *answers) set(name string, ans answer) {
	a.mu.Lock()
	a.by[name] = ans
	a.mu.Unlock()
}

func (a *answers) healAll() {
	a.mu.Lock()
	clear(a.by)
	a.mu.Unlock()
}

func (a *answers) RoundTrip(req *http.Request) (*http.Response, error) {
	a.mu.Lock()
	ans := a.by[req.URL.Host]
	a.mu.Unlock()
	status := http.StatusOK
	switch ans {
	case answerFailing:
		status = http.StatusInternalServerError
	case answerUnauthorized:
		status = http.StatusUnauthorized
	case answerSlow:
		select {
		case <-time.After(a.slow):
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Body: http.NoBody, Request: req}, nil
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
	// running counts the clusters the engine built; lent, the pre-built ones.
	running, lent, holds := &runningSet{n: map[string]int{}}, &runningSet{n: map[string]int{}}, &runningSet{n: map[string]int{}}
	fences := &checkedFences{fenceService: newFenceService(), running: running, inflight: holds}
	// Probes run on every seed, every probeInterval, through the clusters'
	// answers; on even seeds every engagement takes longer than that
	// interval, as engaging a large cluster (every controller's watches
	// listing it) or a server still recovering does.
	const probeInterval = 20 * time.Millisecond
	health := &answers{by: map[string]answer{}, slow: probeInterval + time.Duration(seed%3)*probeInterval}
	e := fleet.New(fleet.Options{Admission: fences, MinBackoff: 2 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		Health:       fleet.HealthOptions{Interval: probeInterval, Timeout: 2 * probeInterval, FailureThreshold: 1 + int(seed%2), MaxProbesPerSecond: -1},
		DrainTimeout: 10 * time.Second, Logger: trace.logger(t, seed)})
	slowEngagements := seed%2 == 0
	newSubscriber := func() *holder {
		h := newHolder()
		if slowEngagements {
			h.slow = func() time.Duration { return 2*probeInterval + time.Duration(rand.IntN(3))*probeInterval }
		}
		return h
	}
	subs := []*holder{newSubscriber()}
	e.Subscribe(subs[0])
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = e.Start(ctx) }()
	var reconciles sync.WaitGroup
	defer func() {
		reconciles.Wait()
		stop()
		if !t.Failed() && !returned(stopped) {
			t.Errorf("seed %d: Start did not return within %s of its context ending", seed, startReturns)
		}
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
		return &fakeCluster{name: name, running: running, answers: health}
	}
	refresh := func() { health.refresh.Add(1) }
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
			// The engine never stops a cluster it did not build while its
			// member is wanted (handed away, its fence lost, it keeps
			// running); once removed or replaced, the one it started stops.
			if src != nil && src.prebuilt != nil && src.prebuilt.stopped.Load() {
				return fmt.Errorf("step %d: the engine stopped the pre-built cluster of %s, whose member is wanted (%s)", step, name, state)
			}
			wantLent := 0
			if src != nil && src.prebuilt != nil && src.prebuilt.runs() {
				wantLent = 1
			}
			if n := lent.get(name); n != wantLent {
				return fmt.Errorf("step %d: %d pre-built clusters of %s run, want %d", step, n, name, wantLent)
			}
			switch {
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
		switch op := rng.IntN(112); {
		case op >= 100: // how the cluster answers its probes changes
			ans := answer((op - 100) / 3)
			health.set(name, ans)
			trace.add("step %d: %s answers %s", step, name, ans)
		case op < 20: // publish or replace
			if src != nil && src.adopted != nil {
				break
			}
			hash++
			failFirst := rng.IntN(5) == 0
			var builds atomic.Int32
			e.SetMember(fleet.Member{Name: name, Hash: fmt.Sprint(hash), Refresh: refresh, Build: func(context.Context) (cluster.Cluster, error) {
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
			cl.running = lent
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
			engaged := make(chan error, 1)
			go func() { engaged <- e.Engage(actx, name, cl) }()
			select {
			case err := <-engaged:
				if err != nil {
					cancel()
					return fail("step %d: Engage(%s): %v", step, name, err)
				}
			case <-time.After(10 * time.Second):
				cancel()
				return fail("step %d: Engage(%s) did not return within 10s\nclusters: %v", step, name, e.Clusters())
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
				h := newSubscriber()
				subs = append(subs, h)
				e.Subscribe(h)
				trace.add("step %d: subscriber %d subscribed", step, len(subs)-1)
			}
		default: // a reconcile of a request for the cluster subscriber 0 holds
			length := time.Duration(rng.IntN(3)) * time.Millisecond
			pause := rng.IntN(3) == 0
			// A reconcile in the middle of a write does not return the
			// moment its context ends.
			stubborn := rng.IntN(2) == 0
			engagement := subs[0].engagement(name)
			if engagement == nil {
				break // the controller drops it: not engaged
			}
			reconciles.Go(func() {
				if pause {
					// The worker is descheduled between its look at the
					// engagement and its hold.
					time.Sleep(time.Millisecond)
				}
				engaged, done, ok := e.Hold(engagement, name)
				if !ok {
					return
				}
				holds.add(name)
				trace.add("step %d: a reconcile holds %s", step, name)
				if stubborn {
					engaged = context.Background()
				}
				select {
				case <-engaged.Done():
				case <-time.After(length):
				}
				holds.done(name)
				done()
			})
		}
		if step%50 == 49 || step == steps-1 {
			// Time passes with the answers as the schedule left them, so
			// that an outage disconnects its cluster; then the schedule is
			// quiet: every cluster answers.
			time.Sleep(3 * probeInterval)
			health.healAll()
			if err := waitFor(10*time.Second, func() error { return quiet(step) }); err != nil {
				return fail("%v\nclusters: %v", err, e.Clusters())
			}
		}
	}

	if seed%2 == 1 {
		return shutDownWhileRead(t, rng, e, names, subs, holds, running, lent, fences, stop, stopped, fail)
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

// shutDownWhileRead stops the engine with its clusters still in place, while
// readers of every kind (a reconcile still draining asks for its cluster and
// holds it; /readyz; listings) run: no reader may panic or see an engaged
// cluster without one, and once Start has returned nothing runs, no fence is
// held and no subscriber holds a cluster.
func shutDownWhileRead(t *testing.T, rng *rand.Rand, e *fleet.Engine, names []string, subs []*holder, holds, running, lent *runningSet,
	fences *checkedFences, stop context.CancelFunc, stopped <-chan struct{}, fail func(string, ...any) bool) bool {
	t.Helper()
	var panicked atomic.Value // string
	read := func() {
		defer func() {
			if r := recover(); r != nil {
				panicked.CompareAndSwap(nil, fmt.Sprintf("%v\n%s", r, debug.Stack()))
			}
		}()
		for _, name := range names {
			if cl, err := e.Get(name); err == nil && cl == nil {
				panicked.CompareAndSwap(nil, fmt.Sprintf("Get(%s) answered a nil cluster without an error", name))
			}
			e.Lookup(name)
			e.State(name)
			e.Snapshot(name)
			if engagement := subs[0].engagement(name); engagement != nil {
				if _, done, ok := e.Hold(engagement, name); ok {
					holds.add(name)
					holds.done(name)
					done()
				}
			}
		}
		e.Clusters()
		_ = e.Ready(nil)
	}
	readers, stopReaders := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for readers.Err() == nil {
				read()
			}
		})
	}
	// Stop at some point of the readers' loops.
	time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
	stop()
	if !returned(stopped) {
		stopReaders()
		return fail("Start did not return within %s of its context ending (a cluster it ran still runs, or a step never ends)", startReturns)
	}
	stopReaders()
	wg.Wait()
	read() // and after Start returned
	if p := panicked.Load(); p != nil {
		return fail("a reader of the engine panicked while it shut down: %s", p)
	}
	err := waitFor(10*time.Second, func() error {
		if v := fences.violations.Load(); v != nil {
			return fmt.Errorf("%s", v)
		}
		for _, name := range names {
			if cl, err := e.Get(name); err == nil {
				return fmt.Errorf("%s still engaged with %p after the engine stopped", name, cl)
			}
			if fences.holds(name) {
				return fmt.Errorf("fence of %s held after the engine stopped", name)
			}
			if n := running.get(name) + lent.get(name); n > 0 {
				return fmt.Errorf("%d clusters of %s run after the engine stopped", n, name)
			}
			for i, h := range subs {
				if got, ok := h.Engaged()[name]; ok {
					return fmt.Errorf("subscriber %d still holds %p of %s after the engine stopped", i, got, name)
				}
			}
		}
		return nil
	})
	if err != nil {
		return fail("after the engine stopped: %v", err)
	}
	return true
}

// startReturns bounds the wait for Start to return once its context ended:
// the drain's bound (the model's DrainTimeout) and some. A Start that does
// not return fails the seed rather than hanging the test.
const startReturns = 20 * time.Second

func returned(stopped <-chan struct{}) bool {
	select {
	case <-stopped:
		return true
	case <-time.After(startReturns):
		return false
	}
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
