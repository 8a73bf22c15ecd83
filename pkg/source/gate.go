package source

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	"github.com/mcruntime/multicluster-runtime/internal/queue"
)

// syncGate holds what a cluster's handler adds to the controller's queue
// until the cluster's informer has delivered its initial list, then replays
// it and lets later additions through.
//
// Without it, the first object of a newly engaged cluster is reconciled while
// its informer is still listing; a cached read in the reconciler then blocks
// in controller-runtime's sync wait, which polls every 100ms. Holding the
// initial list back is what controller-runtime itself does at start-up (no
// reconcile before the caches sync), applied per cluster.
type syncGate[request comparable] struct {
	workqueue.TypedRateLimitingInterface[request]

	opened atomic.Bool // read without the lock on the hot path

	mu      sync.Mutex
	open    bool
	pending []func()
}

var _ priorityqueue.PriorityQueue[string] = &syncGate[string]{}

func newSyncGate[request comparable](q workqueue.TypedRateLimitingInterface[request]) *syncGate[request] {
	return &syncGate[request]{TypedRateLimitingInterface: q}
}

// through runs add now if the gate is open, or keeps it for release.
func (g *syncGate[request]) through(add func()) {
	if g.opened.Load() {
		add()
		return
	}
	g.mu.Lock()
	if !g.open {
		g.pending = append(g.pending, add)
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	add()
}

// release opens the gate and replays what was held, in order.
func (g *syncGate[request]) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, add := range g.pending {
		add()
	}
	g.pending, g.open = nil, true
	g.opened.Store(true)
}

// discard drops what was held; the cluster left before it synced.
func (g *syncGate[request]) discard() {
	g.mu.Lock()
	g.pending = nil
	g.mu.Unlock()
}

// The adds check the open gate first: once the cluster has synced, every
// event takes that path, and building the closure for through would cost it
// an allocation.

func (g *syncGate[request]) Add(item request) {
	if g.opened.Load() {
		g.TypedRateLimitingInterface.Add(item)
		return
	}
	g.through(func() { g.TypedRateLimitingInterface.Add(item) })
}

func (g *syncGate[request]) AddAfter(item request, d time.Duration) {
	if g.opened.Load() {
		g.TypedRateLimitingInterface.AddAfter(item, d)
		return
	}
	g.through(func() { g.TypedRateLimitingInterface.AddAfter(item, d) })
}

func (g *syncGate[request]) AddRateLimited(item request) {
	if g.opened.Load() {
		g.TypedRateLimitingInterface.AddRateLimited(item)
		return
	}
	g.through(func() { g.TypedRateLimitingInterface.AddRateLimited(item) })
}

func (g *syncGate[request]) AddWithOpts(o priorityqueue.AddOpts, items ...request) {
	if g.opened.Load() {
		queue.AddWithOpts(g.TypedRateLimitingInterface, o, items...)
		return
	}
	g.through(func() { queue.AddWithOpts(g.TypedRateLimitingInterface, o, items...) })
}

func (g *syncGate[request]) GetWithPriority() (request, int, bool) {
	return queue.GetWithPriority(g.TypedRateLimitingInterface)
}
