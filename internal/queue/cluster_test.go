package queue

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/pkg/controller/fairqueue"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recordingQueue records what is added to it and how.
type recordingQueue[T comparable] struct {
	workqueue.TypedRateLimitingInterface[T] // nil: only the methods below are called
	mu                                      sync.Mutex
	added                                   []added[T]
}

type added[T comparable] struct {
	how      string
	item     T
	priority int
	after    time.Duration
}

func (q *recordingQueue[T]) record(a added[T]) {
	q.mu.Lock()
	q.added = append(q.added, a)
	q.mu.Unlock()
}

func (q *recordingQueue[T]) Add(item T) { q.record(added[T]{how: "Add", item: item}) }
func (q *recordingQueue[T]) AddAfter(item T, d time.Duration) {
	q.record(added[T]{how: "AddAfter", item: item, after: d})
}
func (q *recordingQueue[T]) AddRateLimited(item T) {
	q.record(added[T]{how: "AddRateLimited", item: item})
}

func (q *recordingQueue[T]) items() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	var items []T
	for _, a := range q.added {
		items = append(items, a.item)
	}
	return items
}

// recordingPriorityQueue is a recordingQueue with priorities.
type recordingPriorityQueue[T comparable] struct{ recordingQueue[T] }

func (q *recordingPriorityQueue[T]) AddWithOpts(o priorityqueue.AddOpts, items ...T) {
	for _, item := range items {
		q.record(added[T]{how: "AddWithOpts", item: item, priority: ptr.Deref(o.Priority, 0), after: o.After})
	}
}
func (q *recordingPriorityQueue[T]) GetWithPriority() (T, int, bool) { panic("not called") }

func req(name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
}

func tagged(cluster, name string) mcreconcile.Request {
	return mcreconcile.Request{ClusterName: cluster, Request: req(name)}
}

// A held queue keeps every add until Release, then replays them in the
// order they came, each through the method it came by and with its
// priority, each request tagged with the cluster; later adds go through at
// once.
func TestClusterHoldsUntilReleaseAndReplaysInOrder(t *testing.T) {
	q := &recordingPriorityQueue[mcreconcile.Request]{}
	c := ForCluster("member", q, true)
	c.Add(req("a"))
	c.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(-100)}, req("b"), req("c"))
	c.AddAfter(req("d"), time.Second)
	c.AddRateLimited(req("e"))
	c.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(10)}, req("f"))
	if got := q.items(); len(got) != 0 {
		t.Fatalf("added before the release: %v", got)
	}
	c.Release()
	c.Add(req("g"))
	want := []added[mcreconcile.Request]{
		{how: "Add", item: tagged("member", "a")},
		{how: "AddWithOpts", item: tagged("member", "b"), priority: -100},
		{how: "AddWithOpts", item: tagged("member", "c"), priority: -100},
		{how: "AddAfter", item: tagged("member", "d"), after: time.Second},
		{how: "AddRateLimited", item: tagged("member", "e")},
		{how: "AddWithOpts", item: tagged("member", "f"), priority: 10},
		{how: "Add", item: tagged("member", "g")},
	}
	if !slices.Equal(q.added, want) {
		t.Fatalf("added\n%v\nwant\n%v", q.added, want)
	}
	c.Release() // a second release replays nothing
	if len(q.added) != len(want) {
		t.Fatalf("a second Release added %v", q.added[len(want):])
	}
}

// A queue without priorities gets the closest plain add for what a handler
// adds with options, held or not.
func TestClusterWithoutPriorities(t *testing.T) {
	q := &recordingQueue[string]{}
	c := Held[string](q)
	c.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(-100)}, "a")
	c.AddWithOpts(priorityqueue.AddOpts{After: time.Minute}, "b")
	c.Release()
	c.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, "c")
	want := []added[string]{{how: "Add", item: "a"}, {how: "AddAfter", item: "b", after: time.Minute}, {how: "AddRateLimited", item: "c"}}
	if !slices.Equal(q.added, want) {
		t.Fatalf("added %v, want %v", q.added, want)
	}
}

// Discard drops what was held, and what comes after: the cluster left
// before it synced, and a release afterwards passes nothing on.
func TestClusterDiscard(t *testing.T) {
	q := &recordingQueue[string]{}
	c := Held[string](q)
	c.Add("a")
	c.Discard()
	c.Add("b")
	c.AddWithOpts(priorityqueue.AddOpts{}, "c", "d")
	c.Release()
	if got := q.items(); len(got) != 0 {
		t.Fatalf("added after a discard: %v", got)
	}
	if len(c.held) != 0 {
		t.Fatalf("%d adds kept after a discard", len(c.held))
	}
}

// Adds that race the release are neither lost nor ahead of the held ones:
// every item of one adder arrives in the order it added them, and the held
// ones first.
func TestClusterConcurrentRelease(t *testing.T) {
	q := &recordingQueue[string]{}
	c := Held[string](q)
	c.Add("held")
	const adders, each = 4, 500
	var wg sync.WaitGroup
	for a := range adders {
		wg.Go(func() {
			for i := range each {
				c.Add(fmt.Sprintf("%d-%04d", a, i))
			}
		})
	}
	c.Release()
	wg.Wait()
	got := q.items()
	if len(got) != 1+adders*each || got[0] != "held" {
		t.Fatalf("%d items added, first %q; want %d, first \"held\"", len(got), got[0], 1+adders*each)
	}
	for a := range adders {
		prefix := fmt.Sprintf("%d-", a)
		var seen []string
		for _, item := range got {
			if strings.HasPrefix(item, prefix) {
				seen = append(seen, item)
			}
		}
		for i, item := range seen {
			if want := fmt.Sprintf("%d-%04d", a, i); item != want {
				t.Fatalf("adder %d: item %d is %q, want %q", a, i, item, want)
			}
		}
	}
}

// Through the fair queue, a released queue tags and passes requests on
// with their priorities, and an add through the open gate allocates
// nothing: the fair queue is called directly.
func TestClusterIntoFairQueue(t *testing.T) {
	fq := fairqueue.New[mcreconcile.Request]("", fairqueue.Options[mcreconcile.Request]{ClusterOf: func(r mcreconcile.Request) string { return r.ClusterName }})
	defer fq.ShutDown()
	c := ForCluster("member", fq, true)
	c.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(-100)}, req("low"))
	if n := fq.Len(); n != 0 {
		t.Fatalf("%d requests in the queue before the release", n)
	}
	c.Release()
	c.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(10)}, req("high"))
	for _, want := range []struct {
		name     string
		priority int
	}{{"high", 10}, {"low", -100}} {
		item, priority, _ := c.GetWithPriority()
		if item != req(want.name) || priority != want.priority {
			t.Fatalf("got %v at priority %d, want %s at %d", item, priority, want.name, want.priority)
		}
		c.Done(item)
	}
	if n := testing.AllocsPerRun(100, func() {
		c.AddWithOpts(priorityqueue.AddOpts{}, req("again"))
		c.Add(req("again"))
	}); n != 0 {
		t.Fatalf("an add through the open gate allocates %v times, want 0", n)
	}
	if item, _ := fq.Get(); item != tagged("member", "again") {
		t.Fatalf("the fair queue holds %v, want the tagged request", item)
	}
}

// A queue not held passes adds on at once: it is the tagging view that a
// lifted handler gives its handler outside mcsource.Kind.
func TestClusterNotHeld(t *testing.T) {
	q := &recordingQueue[mcreconcile.Request]{}
	c := ForCluster("member", q, false)
	c.Add(req("a"))
	if got := q.items(); !slices.Equal(got, []mcreconcile.Request{tagged("member", "a")}) {
		t.Fatalf("added %v", got)
	}
	if !c.Wraps(q) {
		t.Fatal("Wraps is false for its own queue")
	}
}

// Into the fair queue, the held adds are replayed in runs under one lock
// each: runs longer than a batch, runs cut where the options change. Every
// held request arrives, with its priority, in the order it was added.
func TestClusterReplayIntoFairQueue(t *testing.T) {
	fq := fairqueue.New[mcreconcile.Request]("", fairqueue.Options[mcreconcile.Request]{ClusterOf: func(r mcreconcile.Request) string { return r.ClusterName }})
	defer fq.ShutDown()
	c := ForCluster("member", fq, true)
	const initial = 3*replayBatch + 5
	var want []string
	for i := range initial {
		name := fmt.Sprintf("list-%03d", i)
		c.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(-100)}, req(name))
		want = append(want, name)
		if i == replayBatch/2 {
			c.Add(req("live")) // cuts the run: priority 0
		}
	}
	c.AddAfter(req("later"), time.Hour)
	c.Release()
	if n := fq.Len(); n != initial+1 {
		t.Fatalf("%d requests ready after the release, want %d", n, initial+1)
	}
	want = append([]string{"live"}, want...)
	for _, name := range want {
		item, _ := c.Get()
		if item != req(name) {
			t.Fatalf("got %v, want %s", item, name)
		}
		c.Done(item)
	}
}

// hidden hides the fair queue's type: a Cluster in front of it replays one
// add at a time, through the interface.
type hidden struct {
	*fairqueue.Queue[mcreconcile.Request]
}

// BenchmarkClusterRelease measures a cluster's initial list of 10,000
// requests, held at low priority and released into the fair queue: in
// batches (the fair queue seen as such), and one add at a time.
func BenchmarkClusterRelease(b *testing.B) {
	reqs := make([]reconcile.Request, 10000)
	for i := range reqs {
		reqs[i] = req(fmt.Sprintf("cm-%d", i))
	}
	low := priorityqueue.AddOpts{Priority: ptr.To(-100)}
	for _, kind := range []string{"batched", "one-by-one"} {
		b.Run(kind, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				fq := fairqueue.New[mcreconcile.Request]("", fairqueue.Options[mcreconcile.Request]{ClusterOf: func(r mcreconcile.Request) string { return r.ClusterName }})
				var q workqueue.TypedRateLimitingInterface[mcreconcile.Request] = fq
				if kind == "one-by-one" {
					q = hidden{fq}
				}
				c := ForCluster("member", q, true)
				for _, r := range reqs {
					c.AddWithOpts(low, r)
				}
				c.Release()
				if fq.Len() != len(reqs) {
					b.Fatalf("%d queued", fq.Len())
				}
				fq.ShutDown()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(reqs)), "ns/request")
		})
	}
}
