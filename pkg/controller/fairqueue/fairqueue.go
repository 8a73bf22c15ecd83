package fairqueue

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
)

// Options configure a Queue.
type Options[T comparable] struct {
	// ClusterOf names the cluster a request belongs to. Required.
	ClusterOf func(T) string

	// RateLimiter decides the delay of AddRateLimited. Default: per-item
	// exponential backoff from 5ms to 1000s, as controller-runtime's priority
	// queue.
	RateLimiter workqueue.TypedRateLimiter[T]

	// MetricsProvider receives the workqueue metrics of the queue, labelled
	// with its name. Default: controller-runtime's workqueue metrics in
	// metrics.Registry. A queue without a name reports no metrics.
	MetricsProvider workqueue.MetricsProvider

	// Weight is the number of items a cluster may be handed in one turn,
	// asked when the cluster's turn begins, with the queue locked: it must be
	// quick and must not call the queue. Default: 1 for every cluster.
	// Values below 1 count as 1.
	Weight func(cluster string) int

	// MaxInFlightPerCluster caps the requests of one cluster in processing at
	// once (handed out by Get and not yet Done); the cluster's other items
	// wait. Default 0: no cap.
	MaxInFlightPerCluster int

	// FIFO ignores priorities: the items of a cluster are handed out in the
	// order they were added, as controller-runtime's plain workqueue does.
	// GetWithPriority then reports priority 0.
	FIFO bool
}

// Queue is a fair, rate-limiting priority queue. Create it with New and end
// it with ShutDown.
type Queue[T comparable] struct {
	opts    Options[T]
	metrics *metrics[T]

	mu   sync.Mutex
	cond *sync.Cond // a ready item, freed cluster capacity, shutdown or drain

	// keys holds every item queued or in processing, one map for both: a
	// request costs a lookup when added and one when Done, none when handed
	// out, all of them under mu.
	keys     map[T]*slot[T]
	keysPeak int       // most keys since keys was last made (see compacted)
	slots    sync.Pool // of *slot[T], made outside the lock and unused by an Add that found its item queued
	inflight int       // items handed out and not yet Done
	// processing holds the entries handed out and not yet Done, each at its
	// index: the metrics loop reads their ages without walking every key.
	processing []*entry[T]
	clusters   map[string]*cluster[T]
	clusterPk  int          // most clusters since clusters was last made
	waiting    entryHeap[T] // by due time
	ready      int          // entries ready or parked: what Len reports
	seq        uint64

	// The ring of clusters with ready items; cur is the cluster whose turn it
	// is and credit what is left of its turn.
	cur     *cluster[T]
	ringLen int
	credit  int

	epoch    time.Time // of Queue.now
	shutdown bool
	done     chan struct{} // closed by ShutDown
	wake     chan struct{} // the earliest waiting item changed
	stopped  sync.WaitGroup
}

var (
	_ workqueue.TypedRateLimitingInterface[string] = &Queue[string]{}
	_ priorityqueue.PriorityQueue[string]          = &Queue[string]{}
)

type entryState uint8

const (
	stateReady   entryState = iota // in its cluster's ready heap
	stateWaiting                   // in the waiting heap until readyAt
	stateParked                    // ready, but the same item is processing
)

// slot is one item's place in the queue: queued (ready, waiting or parked)
// and in processing (handed out and not yet Done), each at most once.
type slot[T comparable] struct {
	queued, busy *entry[T]
	// own is the memory of the item's first entry: an item added once and
	// processed once costs one allocation. An item added again while it
	// processes in own gets an entry of its own.
	own entry[T]
}

// newEntry returns memory for the item's next queued entry; under the lock,
// with no entry queued.
func (s *slot[T]) newEntry() *entry[T] {
	if s.busy == &s.own {
		return &entry[T]{}
	}
	return &s.own
}

type entry[T comparable] struct {
	key      T
	s        *slot[T]
	c        *cluster[T]
	priority int
	seq      uint64 // FIFO order among equal priorities
	at       int64  // waiting: when due; ready: since when (latency metric); processing: since when; see Queue.now
	state    entryState
	index    int // in the ready or the waiting heap
}

type cluster[T comparable] struct {
	name       string
	ready      entryHeap[T] // by priority, then first added
	inflight   int
	entries    int // entries of the cluster queued
	prev, next *cluster[T]
	inRing     bool
	paused     bool // its items are kept, not handed out (Queue.Pause)
}

// New returns a started queue. name labels its metrics (controller-runtime
// passes the controller's name). It panics without Options.ClusterOf, a
// programming error.
func New[T comparable](name string, opts Options[T]) *Queue[T] {
	if opts.ClusterOf == nil {
		panic("fairqueue: Options.ClusterOf is required")
	}
	if opts.RateLimiter == nil {
		opts.RateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[T](5*time.Millisecond, 1000*time.Second)
	}
	q := &Queue[T]{
		opts:     opts,
		keys:     map[T]*slot[T]{},
		clusters: map[string]*cluster[T]{},
		epoch:    time.Now(),
		done:     make(chan struct{}),
		wake:     make(chan struct{}, 1),
	}
	q.waiting.key = waitKey[T]
	q.slots.New = func() any { return new(slot[T]) }
	q.cond = sync.NewCond(&q.mu)
	q.metrics = newMetrics[T](name, opts.MetricsProvider)
	q.stopped.Add(1)
	go q.waitLoop()
	if q.metrics != nil {
		q.stopped.Add(1)
		go q.metricsLoop()
	}
	return q
}

// NewQueueFunc returns a controller.TypedOptions.NewQueue that builds a fair
// queue with opts and the controller's rate limiter.
func NewQueueFunc[T comparable](opts Options[T]) func(string, workqueue.TypedRateLimiter[T]) workqueue.TypedRateLimitingInterface[T] {
	return func(name string, rl workqueue.TypedRateLimiter[T]) workqueue.TypedRateLimitingInterface[T] {
		o := opts
		if rl != nil {
			o.RateLimiter = rl
		}
		return New(name, o)
	}
}

// Add queues item now.
func (q *Queue[T]) Add(item T) { q.AddWithOpts(priorityqueue.AddOpts{}, item) }

// AddAfter queues item once d has passed.
func (q *Queue[T]) AddAfter(item T, d time.Duration) {
	q.AddWithOpts(priorityqueue.AddOpts{After: d}, item)
}

// AddRateLimited queues item after the rate limiter's delay for it.
func (q *Queue[T]) AddRateLimited(item T) {
	q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, item)
}

// Forget ends the rate limiter's backoff for item.
func (q *Queue[T]) Forget(item T) { q.opts.RateLimiter.Forget(item) }

// NumRequeues is the number of rate-limited adds of item since its last Forget.
func (q *Queue[T]) NumRequeues(item T) int { return q.opts.RateLimiter.NumRequeues(item) }

// AddWithOpts queues items as controller-runtime's priority queue does: an
// item already queued keeps the higher of the priorities and the earlier of
// the ready times; an item whose priority rises goes behind the items queued
// at its new priority.
//
// Thousands of informers' handlers add at once while the workers Get and
// Done: everything that does not need the queue's state (the rate limiter,
// the items' clusters, the clock, a new item's memory, the metrics and the
// wake-up of workers) is done outside the lock, and the items of one call
// are queued under one lock.
func (q *Queue[T]) AddWithOpts(o priorityqueue.AddOpts, items ...T) {
	priority := 0
	if o.Priority != nil && !q.opts.FIFO {
		priority = *o.Priority
	}
	var one [1]pendingAdd[T] // the common case, one item, allocates no slice
	adds := one[:0]
	if len(items) > 1 {
		adds = make([]pendingAdd[T], 0, len(items))
	}
	for _, key := range items {
		a := pendingAdd[T]{key: key, after: o.After, cluster: q.opts.ClusterOf(key), fresh: q.slots.Get().(*slot[T])}
		if o.RateLimited {
			if rl := q.opts.RateLimiter.When(key); a.after <= 0 || rl < a.after {
				a.after = rl
			}
		}
		adds = append(adds, a)
	}
	now := q.now()

	readied := 0
	q.mu.Lock()
	shutdown := q.shutdown // adds are ignored, and not counted, after ShutDown
	if !shutdown {
		for i := range adds {
			if q.add(&adds[i], priority, now) {
				readied++
			}
		}
	}
	q.mu.Unlock()
	for _, a := range adds {
		if a.fresh != nil {
			q.slots.Put(a.fresh)
		}
		if a.after > 0 && !shutdown {
			q.metrics.retry()
		}
	}
	q.readied(readied)
}

// pendingAdd is one item of AddWithOpts, prepared outside the lock.
type pendingAdd[T comparable] struct {
	key     T
	after   time.Duration
	cluster string
	fresh   *slot[T] // the item's slot if it is new; add sets it nil when it takes it
}

// add queues one item; under the lock. It reports whether the item was
// made ready: the caller then calls readied once it has released the lock.
func (q *Queue[T]) add(a *pendingAdd[T], priority int, now int64) bool {
	s, ok := q.keys[a.key]
	if !ok {
		s, a.fresh = a.fresh, nil
		q.keys[a.key] = s
		q.keysPeak = max(q.keysPeak, len(q.keys))
	}
	e := s.queued
	if e == nil {
		e = s.newEntry()
		*e = entry[T]{key: a.key, s: s, priority: priority, seq: q.nextSeq(), index: -1}
		if s.busy != nil {
			e.c = s.busy.c // the same item, the same cluster
		} else {
			e.c = q.clusterFor(a.cluster)
		}
		e.c.entries++
		s.queued = e
		if a.after > 0 {
			q.pushWaiting(e, now+int64(a.after))
			return false
		}
		return q.makeReady(e, now)
	}
	if priority > e.priority {
		e.priority, e.seq = priority, q.nextSeq()
		if e.state == stateReady {
			e.c.ready.fix(e)
		}
	}
	if e.state != stateWaiting {
		return false
	}
	if a.after <= 0 {
		q.waiting.remove(e)
		return q.makeReady(e, now)
	}
	if at := now + int64(a.after); at < e.at {
		e.at = at
		q.waiting.fix(e)
		if e.index == 0 {
			q.notifyWaiting()
		}
	}
	return false
}

// Get hands out the next item. See GetWithPriority.
func (q *Queue[T]) Get() (T, bool) {
	item, _, shutdown := q.GetWithPriority()
	return item, shutdown
}

// GetWithPriority blocks until an item can be handed out, taking the clusters
// with ready items in turn, and returns it with its priority. The caller must
// call Done with it. After ShutDown it returns shutdown true at once.
func (q *Queue[T]) GetWithPriority() (item T, priority int, shutdown bool) {
	q.mu.Lock()
	for {
		if q.shutdown {
			q.mu.Unlock()
			var zero T
			return zero, 0, true
		}
		if e := q.pick(); e != nil {
			e.s.queued, e.s.busy = nil, e
			e.index = len(q.processing)
			q.processing = append(q.processing, e)
			q.inflight++
			e.c.entries--
			e.c.inflight++
			q.ready--
			now := q.now()
			waited := now - e.at
			// The entry is kept while it is processed: Done finds its cluster
			// through it, without hashing the cluster's name.
			e.at = now
			item, priority = e.key, e.priority
			q.mu.Unlock()
			// Observed outside the lock: the metrics are atomics of their
			// own, and every worker's Get and Done would wait for them.
			q.metrics.get(waited)
			return item, priority, false
		}
		q.cond.Wait()
	}
}

// Done marks item as processed. If it was added again meanwhile, it is
// queued again now.
func (q *Queue[T]) Done(item T) {
	q.mu.Lock()
	s, ok := q.keys[item]
	if !ok || s.busy == nil {
		q.mu.Unlock()
		return
	}
	p := s.busy
	s.busy = nil
	q.stopProcessing(p)
	q.inflight--
	if s.queued == nil {
		delete(q.keys, item)
		q.keys = compacted(q.keys, &q.keysPeak)
	}
	now := q.now()
	worked := now - p.at
	c := p.c
	c.inflight--
	readied, freed := false, false
	if e := s.queued; e != nil && e.state == stateParked {
		q.ready-- // counted again by makeReady
		readied = q.makeReady(e, now)
	} else if q.opts.MaxInFlightPerCluster > 0 && c.ready.Len() > 0 {
		// The cluster may have been at its cap: a worker may wait for it.
		// Without a cap no worker waits while a cluster has ready items:
		// each was signalled when made ready.
		freed = true
	}
	q.dropIfIdle(c)
	if q.shutdown && q.inflight == 0 {
		q.cond.Broadcast() // ShutDownWithDrain
	}
	q.mu.Unlock()
	q.metrics.done(worked) // outside the lock, as in GetWithPriority
	if readied {
		q.readied(1)
	} else if freed {
		q.cond.Signal()
	}
}

// Pause stops handing out the items of cluster until Resume: they are kept
// and deduplicated as any queued item, added again while in processing as
// any other, and none is handed out. It is how a controller holds the
// requests of a paused cluster in one place, so that each is reconciled once
// after the resume whatever the moment it was added. Items in processing
// are not called back.
func (q *Queue[T]) Pause(cluster string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	c := q.clusterFor(cluster)
	c.paused = true
	if c.inRing {
		q.unlink(c)
	}
}

// Resume hands out the items of cluster again, in turn with the other
// clusters; a cluster that was not paused is left as it is.
func (q *Queue[T]) Resume(cluster string) {
	q.mu.Lock()
	c, ok := q.clusters[cluster]
	if !ok || !c.paused {
		q.mu.Unlock()
		return
	}
	c.paused = false
	n := c.ready.Len()
	if n > 0 {
		q.link(c)
	}
	q.dropIfIdle(c)
	q.mu.Unlock()
	for range n {
		q.cond.Signal()
	}
}

// Len is the number of items ready to be handed out, including those that
// wait for the same item's processing, for their cluster's cap or for their
// paused cluster's Resume; items added with a delay count once the delay has
// passed.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ready
}

// ShutDown stops the queue: Get returns shutdown, adds are ignored, and the
// queue's goroutines end.
func (q *Queue[T]) ShutDown() {
	q.mu.Lock()
	if q.shutdown {
		q.mu.Unlock()
		return
	}
	q.shutdown = true
	close(q.done)
	q.cond.Broadcast()
	q.mu.Unlock()
	q.stopped.Wait()
}

// ShutDownWithDrain shuts the queue down and waits until every item handed
// out has been Done.
func (q *Queue[T]) ShutDownWithDrain() {
	q.ShutDown()
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.inflight > 0 {
		q.cond.Wait()
	}
}

// ShuttingDown reports whether ShutDown was called.
func (q *Queue[T]) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shutdown
}
