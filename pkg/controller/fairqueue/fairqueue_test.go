package fairqueue

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// req is a test request: "cluster/key".
type req string

func clusterOf(r req) string { c, _, _ := strings.Cut(string(r), "/"); return c }

func newQueue(t *testing.T, o Options[req]) *Queue[req] {
	t.Helper()
	o.ClusterOf = clusterOf
	q := New("", o)
	t.Cleanup(q.ShutDown)
	return q
}

// get takes the next item, failing the test if none comes within 10s.
func get(t *testing.T, q *Queue[req]) req {
	t.Helper()
	type got struct {
		r        req
		shutdown bool
	}
	ch := make(chan got, 1)
	go func() { r, s := q.Get(); ch <- got{r, s} }()
	select {
	case g := <-ch:
		if g.shutdown {
			t.Fatal("queue shut down")
		}
		return g.r
	case <-time.After(10 * time.Second):
		q.ShutDown() // releases the Get
		t.Fatal("no item handed out")
		return ""
	}
}

// noItem asserts that a Get stays blocked while the queue holds only items
// it may not hand out; the pending Get is released by shutting q down.
func noItem(t *testing.T, q *Queue[req]) {
	t.Helper()
	ch := make(chan req, 1)
	go func() { r, _ := q.Get(); ch <- r }()
	select {
	case r := <-ch:
		t.Fatalf("got %q, want nothing", r)
	case <-time.After(50 * time.Millisecond):
	}
	q.ShutDown()
	<-ch
}

func TestQuietClusterIsServedBeforeBusyBacklog(t *testing.T) {
	q := newQueue(t, Options[req]{})
	for i := range 5000 {
		q.Add(req(fmt.Sprintf("busy/%d", i)))
	}
	q.Add("quiet/x")
	var pos int
	for pos = 1; ; pos++ {
		if r := get(t, q); r == "quiet/x" {
			break
		} else {
			q.Done(r)
		}
	}
	if pos > 2 {
		t.Fatalf("quiet request handed out at position %d behind 5000 busy ones, want at most 2", pos)
	}
}

func TestRoundRobinAcrossClusters(t *testing.T) {
	q := newQueue(t, Options[req]{})
	for i := range 3 {
		for _, c := range []string{"a", "b", "c"} {
			q.Add(req(fmt.Sprintf("%s/%d", c, i)))
		}
	}
	var got []string
	for range 9 {
		r := get(t, q)
		q.Done(r)
		got = append(got, clusterOf(r))
	}
	if want := "a b c a b c a b c"; strings.Join(got, " ") != want {
		t.Fatalf("order %v, want %s", got, want)
	}
}

func TestWeights(t *testing.T) {
	q := newQueue(t, Options[req]{Weight: func(c string) int {
		if c == "a" {
			return 3
		}
		return 0 // counts as 1
	}})
	for i := range 6 {
		q.Add(req(fmt.Sprintf("a/%d", i)))
		q.Add(req(fmt.Sprintf("b/%d", i)))
	}
	var got []string
	for range 8 {
		r := get(t, q)
		q.Done(r)
		got = append(got, clusterOf(r))
	}
	if want := "a a a b a a a b"; strings.Join(got, " ") != want {
		t.Fatalf("order %v, want %s", got, want)
	}
}

func TestPrioritiesWithinClusterFairAcross(t *testing.T) {
	q := newQueue(t, Options[req]{})
	low, high := -100, 10
	q.AddWithOpts(priorityqueue.AddOpts{Priority: &low}, "a/low1", "a/low2")
	q.Add("a/mid")
	q.AddWithOpts(priorityqueue.AddOpts{Priority: &high}, "a/high")
	q.AddWithOpts(priorityqueue.AddOpts{Priority: &low}, "b/low")
	// Raising a queued item's priority puts it behind the items of its new priority.
	q.AddWithOpts(priorityqueue.AddOpts{Priority: &high}, "a/low1")

	var got []string
	for range 5 {
		r, prio, _ := q.GetWithPriority()
		q.Done(r)
		got = append(got, fmt.Sprintf("%s(%d)", r, prio))
	}
	want := "a/high(10) b/low(-100) a/low1(10) a/mid(0) a/low2(-100)"
	if strings.Join(got, " ") != want {
		t.Fatalf("order %v, want %s", got, want)
	}
}

func TestFIFOIgnoresPriorities(t *testing.T) {
	q := newQueue(t, Options[req]{FIFO: true})
	high := 10
	q.Add("a/1")
	q.AddWithOpts(priorityqueue.AddOpts{Priority: &high}, "a/2")
	for _, want := range []req{"a/1", "a/2"} {
		r, prio, _ := q.GetWithPriority()
		if r != want || prio != 0 {
			t.Fatalf("got %s(%d), want %s(0)", r, prio, want)
		}
		q.Done(r)
	}
}

func TestDedup(t *testing.T) {
	q := newQueue(t, Options[req]{})
	q.Add("a/1")
	q.Add("a/1")
	q.AddAfter("a/1", time.Hour) // already ready: stays ready
	if n := q.Len(); n != 1 {
		t.Fatalf("Len %d, want 1", n)
	}
	r := get(t, q)
	q.Done(r)
	noItem(t, q)
}

func TestReaddWhileProcessingWaitsForDone(t *testing.T) {
	q := newQueue(t, Options[req]{})
	q.Add("a/1")
	r := get(t, q)
	q.Add("a/1")
	q.Add("b/1")
	if got := get(t, q); got != "b/1" {
		t.Fatalf("got %s while a/1 is processing, want b/1", got)
	}
	ch := make(chan req, 1)
	go func() { r, _ := q.Get(); ch <- r }()
	select {
	case r := <-ch:
		t.Fatalf("a/1 handed out twice at once: %s", r)
	case <-time.After(50 * time.Millisecond):
	}
	q.Done(r)
	select {
	case r := <-ch:
		if r != "a/1" {
			t.Fatalf("got %s, want a/1 again", r)
		}
	case <-time.After(time.Second):
		t.Fatal("a/1 not handed out again after Done")
	}
}

func TestPerClusterCap(t *testing.T) {
	q := newQueue(t, Options[req]{MaxInFlightPerCluster: 2})
	for i := range 4 {
		q.Add(req(fmt.Sprintf("a/%d", i)))
	}
	q.Add("b/0")
	a0, b0, a1 := get(t, q), get(t, q), get(t, q)
	if clusterOf(a0) != "a" || b0 != "b/0" || clusterOf(a1) != "a" {
		t.Fatalf("got %s %s %s", a0, b0, a1)
	}
	// a has two in processing: its other items wait for a Done.
	ch := make(chan req, 1)
	go func() { r, _ := q.Get(); ch <- r }()
	select {
	case r := <-ch:
		t.Fatalf("got %s beyond a's cap", r)
	case <-time.After(50 * time.Millisecond):
	}
	q.Done(a0)
	select {
	case r := <-ch:
		if clusterOf(r) != "a" {
			t.Fatalf("got %s, want an item of a", r)
		}
	case <-time.After(time.Second):
		t.Fatal("a's item not handed out after Done freed its cap")
	}
}

func TestAddAfter(t *testing.T) {
	q := newQueue(t, Options[req]{})
	q.AddAfter("a/later", time.Hour)
	q.AddAfter("a/later", 20*time.Millisecond) // the earlier time wins
	q.AddAfter("a/now", time.Hour)
	q.Add("a/now") // ready at once
	if got := get(t, q); got != "a/now" {
		t.Fatalf("got %s, want a/now", got)
	}
	// Due in 20ms, not in an hour: get would give up first.
	if got := get(t, q); got != "a/later" {
		t.Fatalf("got %s, want a/later", got)
	}
	if n := q.Len(); n != 0 {
		t.Fatalf("Len %d, want 0", n)
	}
}

func TestRateLimiting(t *testing.T) {
	q := newQueue(t, Options[req]{RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[req](time.Millisecond, time.Second)})
	q.AddRateLimited("a/1")
	if got := get(t, q); got != "a/1" {
		t.Fatalf("got %s", got)
	}
	q.Done("a/1")
	q.AddRateLimited("a/1")
	if n := q.NumRequeues("a/1"); n != 2 {
		t.Fatalf("NumRequeues %d, want 2", n)
	}
	q.Forget("a/1")
	if n := q.NumRequeues("a/1"); n != 0 {
		t.Fatalf("NumRequeues after Forget %d, want 0", n)
	}
	if got := get(t, q); got != "a/1" {
		t.Fatalf("got %s", got)
	}
}

func TestShutDown(t *testing.T) {
	q := newQueue(t, Options[req]{})
	ch := make(chan bool, 1)
	go func() { _, s := q.Get(); ch <- s }()
	q.ShutDown()
	select {
	case s := <-ch:
		if !s {
			t.Fatal("blocked Get returned without shutdown")
		}
	case <-time.After(time.Second):
		t.Fatal("blocked Get not released by ShutDown")
	}
	q.Add("a/1")
	if n := q.Len(); n != 0 || !q.ShuttingDown() {
		t.Fatalf("Len %d after ShutDown, want 0", n)
	}
}

func TestShutDownWithDrainWaitsForProcessing(t *testing.T) {
	q := newQueue(t, Options[req]{})
	q.Add("a/1")
	r := get(t, q)
	drained := make(chan struct{})
	go func() { q.ShutDownWithDrain(); close(drained) }()
	select {
	case <-drained:
		t.Fatal("drained while a/1 is processing")
	case <-time.After(50 * time.Millisecond):
	}
	q.Done(r)
	select {
	case <-drained:
	case <-time.After(time.Second):
		t.Fatal("not drained after Done")
	}
}

// TestConcurrent adds from many goroutines while workers take items: every
// key added is handed out, never to two workers at once, and the queue
// forgets every cluster once empty.
func TestConcurrent(t *testing.T) {
	q := newQueue(t, Options[req]{MaxInFlightPerCluster: 2, Weight: func(c string) int { return len(c) }})
	const producers, perProducer, workers = 8, 500, 8
	var inflight sync.Map
	var handled, overlaps atomic.Int64
	seen, added := sync.Map{}, sync.Map{}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				r, shutdown := q.Get()
				if shutdown {
					return
				}
				if _, loaded := inflight.LoadOrStore(r, true); loaded {
					overlaps.Add(1)
				}
				seen.Store(r, true)
				handled.Add(1)
				if handled.Load()%7 == 0 {
					q.AddRateLimited(r) // requeued while processing
				}
				inflight.Delete(r)
				q.Done(r)
			}
		}()
	}
	var pw sync.WaitGroup
	for p := range producers {
		pw.Add(1)
		go func() {
			defer pw.Done()
			for i := range perProducer {
				r := req(fmt.Sprintf("c%d/%d", i%(p+1), i%50))
				added.Store(r, true)
				switch i % 3 {
				case 0:
					q.Add(r)
				case 1:
					q.AddAfter(r, time.Millisecond)
				default:
					prio := i % 5
					q.AddWithOpts(priorityqueue.AddOpts{Priority: &prio}, r)
				}
			}
		}()
	}
	pw.Wait()
	fleettest.Eventually(t, 10*time.Second, func() error {
		q.mu.Lock()
		defer q.mu.Unlock()
		if len(q.keys) != 0 || q.inflight != 0 || len(q.clusters) != 0 {
			return fmt.Errorf("queue not drained: %d items, %d in processing, %d clusters", len(q.keys), q.inflight, len(q.clusters))
		}
		return nil
	})
	q.ShutDown()
	wg.Wait()
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d items handed to two workers at once", n)
	}
	var want, missing int
	added.Range(func(k, _ any) bool {
		want++
		if _, ok := seen.Load(k); !ok {
			missing++
		}
		return true
	})
	if missing != 0 {
		t.Fatalf("%d of %d distinct requests added were never handed out", missing, want)
	}
}

type countingProvider struct {
	adds, retries, depth, latency, work atomic.Int64
	unfinished, longest                 settable
}

// settable is a settable gauge that keeps its last value.
type settable struct{ bits atomic.Uint64 }

func (g *settable) Inc()          {}
func (g *settable) Dec()          {}
func (g *settable) Set(v float64) { g.bits.Store(math.Float64bits(v)) }
func (g *settable) get() float64  { return math.Float64frombits(g.bits.Load()) }

type fn func()

func (f fn) Inc()            { f() }
func (f fn) Dec()            {}
func (f fn) Set(float64)     {}
func (f fn) Observe(float64) { f() }

func (p *countingProvider) NewDepthMetric(string) workqueue.GaugeMetric {
	return gauge{&p.depth}
}
func (p *countingProvider) NewAddsMetric(string) workqueue.CounterMetric {
	return fn(func() { p.adds.Add(1) })
}
func (p *countingProvider) NewLatencyMetric(string) workqueue.HistogramMetric {
	return fn(func() { p.latency.Add(1) })
}
func (p *countingProvider) NewWorkDurationMetric(string) workqueue.HistogramMetric {
	return fn(func() { p.work.Add(1) })
}
func (p *countingProvider) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return &p.unfinished
}
func (p *countingProvider) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return &p.longest
}
func (p *countingProvider) NewRetriesMetric(string) workqueue.CounterMetric {
	return fn(func() { p.retries.Add(1) })
}

type gauge struct{ v *atomic.Int64 }

func (g gauge) Inc()        { g.v.Add(1) }
func (g gauge) Dec()        { g.v.Add(-1) }
func (g gauge) Set(float64) {}

func TestMetrics(t *testing.T) {
	p := &countingProvider{}
	q := New("metrics-test", Options[req]{ClusterOf: clusterOf, MetricsProvider: p})
	defer q.ShutDown()
	q.Add("a/1")
	q.Add("b/1")
	q.AddAfter("c/1", time.Hour)
	r := get(t, q)
	q.Done(r)
	if a, d, l, w, rt := p.adds.Load(), p.depth.Load(), p.latency.Load(), p.work.Load(), p.retries.Load(); a != 2 || d != 1 || l != 1 || w != 1 || rt != 1 {
		t.Fatalf("adds %d depth %d latency %d work %d retries %d, want 2 1 1 1 1", a, d, l, w, rt)
	}
}

// TestUnfinishedWork checks the gauges of the work in processing: they count
// the items handed out and not yet Done, whatever is queued besides, and
// fall to zero once all are Done.
func TestUnfinishedWork(t *testing.T) {
	p := &countingProvider{}
	q := New("unfinished-test", Options[req]{ClusterOf: clusterOf, MetricsProvider: p})
	defer q.ShutDown()
	for _, r := range []req{"a/1", "a/2", "b/1", "b/2"} {
		q.Add(r)
	}
	first := get(t, q)
	time.Sleep(20 * time.Millisecond) // the first item is older than the second
	second := get(t, q)
	fleettest.Eventually(t, 10*time.Second, func() error {
		// Two items process; two more are queued and must not count.
		if u, l := p.unfinished.get(), p.longest.get(); !(u > l && l > 0 && u < 2*l) {
			return fmt.Errorf("unfinished %vs, longest %vs: want the ages of the two items in processing", u, l)
		}
		return nil
	})
	q.Done(first)
	q.Done(second)
	fleettest.Eventually(t, 10*time.Second, func() error {
		if u, l := p.unfinished.get(), p.longest.get(); u != 0 || l != 0 {
			return fmt.Errorf("unfinished %vs, longest %vs after every item is Done, want 0", u, l)
		}
		return nil
	})
}

func TestDefaultMetricsAreControllerRuntimes(t *testing.T) {
	name := fmt.Sprintf("fairqueue-default-metrics-%d", metricsRun.Add(1)) // unique under -count
	q := New(name, Options[req]{ClusterOf: clusterOf})
	defer q.ShutDown()
	q.Add("a/1")
	q.Add("b/1")
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	value := func(metric string) float64 {
		for _, f := range families {
			if f.GetName() != metric {
				continue
			}
			for _, m := range f.GetMetric() {
				if hasLabel(m, "name", name) {
					return m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
		return -1
	}
	if v := value("workqueue_adds_total"); v != 2 {
		t.Fatalf("workqueue_adds_total %v, want 2", v)
	}
	if v := value("workqueue_depth"); v != 2 {
		t.Fatalf("workqueue_depth %v, want 2", v)
	}
}

var metricsRun atomic.Int64

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// TestReaddCyclesWhileProcessing adds an item again while each of its
// entries processes, over several cycles: an item reuses the memory of its
// first entry once that entry is done, and neither entry may be handed out
// twice, lost or take the other's priority.
func TestReaddCyclesWhileProcessing(t *testing.T) {
	q := newQueue(t, Options[req]{})
	q.Add("a/1")
	for cycle := range 6 {
		r := get(t, q)
		if r != "a/1" {
			t.Fatalf("cycle %d: got %s, want a/1", cycle, r)
		}
		prio := cycle
		q.AddWithOpts(priorityqueue.AddOpts{Priority: &prio}, "a/1")
		q.Add("a/2")
		if got := get(t, q); got != "a/2" {
			t.Fatalf("cycle %d: got %s while a/1 processes, want a/2", cycle, got)
		}
		q.Done("a/2")
		if n := q.Len(); n != 1 {
			t.Fatalf("cycle %d: Len %d, want 1 (a/1 waits for its Done)", cycle, n)
		}
		q.Done(r)
		if _, p, _ := q.GetWithPriority(); p != cycle {
			t.Fatalf("cycle %d: a/1 handed out with priority %d, want %d", cycle, p, cycle)
		}
		q.Done("a/1")
		q.Add("a/1")
	}
}

// TestAddWithOptsManyItems adds several items in one call, one of them
// twice and one already queued: each is queued once, in the order given
// within its cluster, and a cluster's items keep their turns.
func TestAddWithOptsManyItems(t *testing.T) {
	q := newQueue(t, Options[req]{})
	q.Add("a/0")
	prio := 1
	q.AddWithOpts(priorityqueue.AddOpts{Priority: &prio}, "a/1", "b/1", "a/2", "a/1", "a/0")
	if n := q.Len(); n != 4 {
		t.Fatalf("Len %d, want 4", n)
	}
	var got []req
	for range 4 {
		r, p, _ := q.GetWithPriority()
		if p != 1 {
			t.Fatalf("%s handed out with priority %d, want 1", r, p)
		}
		got = append(got, r)
		q.Done(r)
	}
	// a/0 rose to priority 1 after a/1 and a/2 were added at it: it goes
	// behind them.
	if want := []req{"a/1", "b/1", "a/2", "a/0"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("handed out %v, want %v", got, want)
	}
}

// TestDonesAtCapWakeEveryWaiter frees two places of a cluster at its cap
// while two workers wait: both are handed an item, not only the first one
// woken.
func TestDonesAtCapWakeEveryWaiter(t *testing.T) {
	q := newQueue(t, Options[req]{MaxInFlightPerCluster: 2})
	for i := range 4 {
		q.Add(req(fmt.Sprintf("a/%d", i)))
	}
	first, second := get(t, q), get(t, q)
	ch := make(chan req, 2)
	for range 2 {
		go func() {
			if r, shutdown := q.Get(); !shutdown {
				ch <- r
			}
		}()
	}
	q.Done(first)
	q.Done(second)
	for i := range 2 {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of 2 waiting workers handed an item after two Dones freed the cap", i)
		}
	}
}

// A queue that drained gives back the memory of its peak: a fleet's sync
// queues a quarter of a million requests once, and a Go map keeps the memory
// of its largest size when its entries are deleted.
func TestDrainedQueueReleasesItsPeak(t *testing.T) {
	const clusters, perCluster = 1000, 200
	q := newQueue(t, Options[req]{})
	items := make([]req, 0, clusters*perCluster)
	for c := range clusters {
		for i := range perCluster {
			items = append(items, req(fmt.Sprintf("c%d/k%d", c, i)))
		}
	}
	before := liveHeap()
	q.AddWithOpts(priorityqueue.AddOpts{}, items...)
	full := liveHeap()
	for range items {
		r := get(t, q)
		q.Done(r)
	}
	if n := q.Len(); n != 0 {
		t.Fatalf("Len after the drain: %d", n)
	}
	after := liveHeap()
	held, retained := full-before, after-before
	t.Logf("%d requests queued held %d KB; drained, the queue keeps %d KB", len(items), held/1024, retained/1024)
	if retained > held/10 {
		t.Errorf("the drained queue keeps %d KB of the %d KB its %d requests held", retained/1024, held/1024, len(items))
	}
	runtime.KeepAlive(items)
}

// liveHeap is the heap in use after two collections.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// A paused cluster's items are kept and deduplicated, whenever they were
// added (before the pause, during it, again while one was in processing),
// and none is handed out; the other clusters are served meanwhile. After
// Resume each is handed out once, in turn with the others.
func TestPausedClusterIsNotServedAndDedups(t *testing.T) {
	q := newQueue(t, Options[req]{})
	q.Add("p/busy")
	busy := get(t, q)
	q.Add("p/1") // queued before the pause
	q.Pause("p")
	q.Add("p/1") // and again during it: once
	q.Add("p/2")
	q.Add("p/2")
	q.Add("p/busy") // added again while in processing: kept
	q.Done(busy)
	q.Add("q/1")
	q.Add("q/2")
	for _, want := range []req{"q/1", "q/2"} {
		if got := get(t, q); got != want {
			t.Fatalf("got %s while p is paused, want %s", got, want)
		}
		q.Done(want)
	}
	if n := q.Len(); n != 3 {
		t.Fatalf("Len %d, want the 3 items of the paused cluster", n)
	}
	ch := make(chan req, 1)
	go func() { r, _ := q.Get(); ch <- r }()
	select {
	case r := <-ch:
		t.Fatalf("got %s of the paused cluster", r)
	case <-time.After(50 * time.Millisecond):
	}
	q.Resume("p")
	got := map[req]int{}
	select {
	case r := <-ch:
		got[r]++
		q.Done(r)
	case <-time.After(time.Second):
		t.Fatal("no item of p handed out after Resume")
	}
	for range 2 {
		r := get(t, q)
		got[r]++
		q.Done(r)
	}
	if want := map[req]int{"p/1": 1, "p/2": 1, "p/busy": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("handed out %v after Resume, want %v", got, want)
	}
	q.Resume("p") // not paused: nothing changes
	if n := len(q.clusters); n != 0 {
		t.Errorf("%d clusters kept by a drained queue", n)
	}
	noItem(t, q)
}

// Pausing a cluster with nothing queued keeps its lane until Resume, and
// Resume forgets it again: churn of pauses leaves nothing behind.
func TestPauseOfAnIdleClusterIsForgottenOnResume(t *testing.T) {
	q := newQueue(t, Options[req]{})
	for i := range 100 {
		c := fmt.Sprint("c", i)
		q.Pause(c)
		q.Resume(c)
	}
	q.Pause("held")
	q.Add("held/1")
	q.Add("free/1")
	if got := get(t, q); got != "free/1" {
		t.Fatalf("got %s, want free/1", got)
	}
	q.Done("free/1")
	q.Resume("held")
	r := get(t, q)
	q.Done(r)
	if r != "held/1" {
		t.Fatalf("got %s, want held/1", r)
	}
	q.mu.Lock()
	n := len(q.clusters)
	q.mu.Unlock()
	if n != 0 {
		t.Errorf("%d clusters kept after the pauses ended, want 0", n)
	}
}
