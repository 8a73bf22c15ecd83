package queue

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/pkg/controller/fairqueue"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// Cluster is the queue one cluster's event handlers add to, in front of the
// controller's queue: it turns each request of the handler (in) into one of
// the controller (out), which for a lifted controller-runtime handler tags
// it with the cluster, and, while held, keeps what is added until Release.
// It is the one wrapper between a cluster's handler and the controller's
// queue: tagging and holding are done in one call per add.
//
// Holding: without it, the first object of a newly engaged cluster is
// reconciled while its informer is still listing; a cached read in the
// reconciler then blocks in controller-runtime's sync wait, which polls every
// 100ms. Holding the initial list back is what controller-runtime itself
// does at start-up (no reconcile before the caches sync), applied per cluster.
//
// It is a priority queue, so that controller-runtime's handlers keep their
// priorities (initial-list events go behind live ones).
type Cluster[in, out comparable] struct {
	q workqueue.TypedRateLimitingInterface[out]
	// pq is q when it keeps priorities; fair is q when it is the library's
	// fair queue, called directly: through an interface the request would
	// escape to the heap, one allocation per event.
	pq    priorityqueue.PriorityQueue[out]
	fair  *fairqueue.Queue[out]
	tag   func(in) out
	untag func(out) in

	opened atomic.Bool // read without the lock on the hot path

	mu    sync.Mutex
	state gateState
	held  []heldAdd[out]
}

type gateState uint8

const (
	holding gateState = iota
	open
	discarded // the cluster left before it synced: adds are dropped
)

// heldAdd is one add kept until Release, with the method it came through.
type heldAdd[out comparable] struct {
	how  addKind
	opts priorityqueue.AddOpts // withOpts; After for after
	item out
}

type addKind uint8

const (
	add addKind = iota
	after
	rateLimited
	withOpts
)

var (
	_ priorityqueue.PriorityQueue[reconcile.Request] = &Cluster[reconcile.Request, mcreconcile.Request]{}
	_ priorityqueue.PriorityQueue[string]            = &Cluster[string, string]{}
)

// ForCluster returns the queue through which a single-cluster handler adds to
// q: each request is tagged with name. A held one keeps the adds until
// Release; one not held passes them on at once.
func ForCluster(name multicluster.ClusterName, q workqueue.TypedRateLimitingInterface[mcreconcile.Request], held bool) *Cluster[reconcile.Request, mcreconcile.Request] {
	return newCluster(q,
		func(r reconcile.Request) mcreconcile.Request {
			return mcreconcile.Request{Request: r, ClusterName: name}
		},
		func(r mcreconcile.Request) reconcile.Request { return r.Request },
		held)
}

// Held returns the queue through which a cluster's handler of the
// controller's own requests adds to q: requests are passed on as they are,
// and held until Release.
func Held[request comparable](q workqueue.TypedRateLimitingInterface[request]) *Cluster[request, request] {
	same := func(r request) request { return r }
	return newCluster(q, same, same, true)
}

func newCluster[in, out comparable](q workqueue.TypedRateLimitingInterface[out], tag func(in) out, untag func(out) in, held bool) *Cluster[in, out] {
	c := &Cluster[in, out]{q: q, tag: tag, untag: untag}
	c.pq, _ = q.(priorityqueue.PriorityQueue[out])
	c.fair, _ = q.(*fairqueue.Queue[out])
	if !held {
		c.state = open
		c.opened.Store(true)
	}
	return c
}

// Wraps reports whether c adds to q.
func (c *Cluster[in, out]) Wraps(q workqueue.TypedRateLimitingInterface[out]) bool { return c.q == q }

// Release passes on what was held, in the order it was added, and lets later
// adds through at once. Adds that come while it replays wait for it, so that
// none overtakes the held ones.
func (c *Cluster[in, out]) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != holding {
		return
	}
	if c.fair != nil {
		c.replayFair()
	} else {
		for i := range c.held {
			c.replay(&c.held[i])
		}
	}
	c.held, c.state = nil, open
	c.opened.Store(true)
}

// replayBatch bounds the held adds the fair queue takes under one lock, so
// that a cluster's initial list of thousands does not keep the workers from
// the queue while it goes in.
const replayBatch = 64

// replayFair passes the held adds on to the fair queue, a run of adds with
// the same options (an initial list: all at low priority) in one call each;
// under c.mu. The fair queue's Add, AddAfter and AddRateLimited are
// AddWithOpts with the matching options.
func (c *Cluster[in, out]) replayFair() {
	var buf [replayBatch]out
	batch := buf[:0]
	var opts priorityqueue.AddOpts
	for i := range c.held {
		a := &c.held[i]
		o := a.opts
		switch a.how {
		case add:
			o = priorityqueue.AddOpts{}
		case rateLimited:
			o = priorityqueue.AddOpts{RateLimited: true}
		}
		if len(batch) == replayBatch || (len(batch) > 0 && !sameOpts(o, opts)) {
			c.fair.AddWithOpts(opts, batch...)
			batch = batch[:0]
		}
		opts = o
		batch = append(batch, a.item)
	}
	if len(batch) > 0 {
		c.fair.AddWithOpts(opts, batch...)
	}
}

// sameOpts reports whether a and b add alike to the fair queue, where no
// priority is priority 0.
func sameOpts(a, b priorityqueue.AddOpts) bool {
	return a.After == b.After && a.RateLimited == b.RateLimited && ptr.Deref(a.Priority, 0) == ptr.Deref(b.Priority, 0)
}

// Discard drops what was held and what is added later: the cluster left
// before its initial list was in.
func (c *Cluster[in, out]) Discard() {
	c.mu.Lock()
	if c.state == holding {
		c.held, c.state = nil, discarded
	}
	c.mu.Unlock()
}

// hold keeps a while the gate is not open and reports whether it did (or
// dropped it, the gate discarded); false: the gate opened meanwhile, and the
// caller passes the add on itself.
func (c *Cluster[in, out]) hold(a heldAdd[out]) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state {
	case holding:
		c.held = append(c.held, a)
		return true
	case discarded:
		return true
	}
	return false
}

// replay passes a held add on through the method it came by; under c.mu.
func (c *Cluster[in, out]) replay(a *heldAdd[out]) {
	switch a.how {
	case add:
		c.q.Add(a.item)
	case after:
		c.q.AddAfter(a.item, a.opts.After)
	case rateLimited:
		c.q.AddRateLimited(a.item)
	default:
		AddWithOpts(c.q, a.opts, a.item)
	}
}

// The adds pass the request on directly once the gate is open (every event
// after the cluster's initial list): one atomic load, no lock. The fair
// queue's Add is AddWithOpts without options, which Add calls itself.

func (c *Cluster[in, out]) Add(item in) {
	if c.opened.Load() || !c.hold(heldAdd[out]{how: add, item: c.tag(item)}) {
		if c.fair != nil {
			c.fair.AddWithOpts(priorityqueue.AddOpts{}, c.tag(item))
			return
		}
		c.q.Add(c.tag(item))
	}
}

func (c *Cluster[in, out]) AddAfter(item in, d time.Duration) {
	if c.opened.Load() || !c.hold(heldAdd[out]{how: after, opts: priorityqueue.AddOpts{After: d}, item: c.tag(item)}) {
		c.q.AddAfter(c.tag(item), d)
	}
}

func (c *Cluster[in, out]) AddRateLimited(item in) {
	if c.opened.Load() || !c.hold(heldAdd[out]{how: rateLimited, item: c.tag(item)}) {
		c.q.AddRateLimited(c.tag(item))
	}
}

func (c *Cluster[in, out]) AddWithOpts(o priorityqueue.AddOpts, items ...in) {
	if len(items) == 1 && c.opened.Load() {
		// The common case, one item through the open gate.
		switch {
		case c.fair != nil:
			c.fair.AddWithOpts(o, c.tag(items[0]))
		case c.pq != nil:
			c.pq.AddWithOpts(o, c.tag(items[0]))
		default:
			AddWithOpts(c.q, o, c.tag(items[0]))
		}
		return
	}
	tagged := make([]out, 0, len(items))
	for _, item := range items {
		if c.opened.Load() || !c.hold(heldAdd[out]{how: withOpts, opts: o, item: c.tag(item)}) {
			tagged = append(tagged, c.tag(item))
		}
	}
	if len(tagged) > 0 {
		AddWithOpts(c.q, o, tagged...)
	}
}

func (c *Cluster[in, out]) Forget(item in)          { c.q.Forget(c.tag(item)) }
func (c *Cluster[in, out]) NumRequeues(item in) int { return c.q.NumRequeues(c.tag(item)) }
func (c *Cluster[in, out]) Done(item in)            { c.q.Done(c.tag(item)) }
func (c *Cluster[in, out]) Len() int                { return c.q.Len() }
func (c *Cluster[in, out]) ShutDown()               { c.q.ShutDown() }
func (c *Cluster[in, out]) ShutDownWithDrain()      { c.q.ShutDownWithDrain() }
func (c *Cluster[in, out]) ShuttingDown() bool      { return c.q.ShuttingDown() }

// Get hands out the next item of the controller's queue, as the handler's
// request (without its cluster). Handlers only add to queues; Get exists to
// satisfy the interface.
func (c *Cluster[in, out]) Get() (in, bool) {
	item, shutdown := c.q.Get()
	return c.untag(item), shutdown
}

func (c *Cluster[in, out]) GetWithPriority() (in, int, bool) {
	item, prio, shutdown := GetWithPriority(c.q)
	return c.untag(item), prio, shutdown
}

// Lifted is implemented by the handlers of pkg/handler that run a
// single-cluster handler of controller-runtime for one cluster (Lift): a
// source that has its own Cluster queue for the cluster hands that queue to
// the inner handler directly, so that an event passes through one wrapper,
// not a tagging one on top of a holding one.
type Lifted[object client.Object] interface {
	Unlift() (multicluster.ClusterName, handler.TypedEventHandler[object, reconcile.Request])
}
