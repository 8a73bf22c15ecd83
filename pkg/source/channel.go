package source

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/mcruntime/multicluster-runtime/internal/engagements"
	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// GenericEvent is a generic event for an object of one cluster, for events
// that do not come from an informer (an external system, a timer, ...).
type GenericEvent[object client.Object] struct {
	ClusterName multicluster.ClusterName
	Object      object
}

// Channel delivers the generic events sent on ch to the handler of the
// event's cluster. Events for a cluster that is not engaged are dropped. It
// keeps no record of the clusters: the controller that starts it (see
// pkg/controller) is asked which clusters it started the source in. One
// goroutine reads ch while the source runs in at least one cluster.
func Channel[object client.Object](ch <-chan GenericEvent[object], h mchandler.TypedEventHandlerFunc[object, mcreconcile.Request], predicates ...predicate.TypedPredicate[object]) *ChannelSource[object] {
	return &ChannelSource[object]{ch: ch, handler: h, predicates: predicates}
}

// ChannelSource is the Source returned by Channel.
type ChannelSource[object client.Object] struct {
	ch         <-chan GenericEvent[object]
	handler    mchandler.TypedEventHandlerFunc[object, mcreconcile.Request]
	predicates []predicate.TypedPredicate[object]

	mu      sync.Mutex
	engaged engagements.Record // the controller's that started the source
	running int                // registrations started and not ended
	stop    chan struct{}      // stops the running dispatcher; nil when none runs
}

var _ Source = &ChannelSource[client.Object]{}

// ForCluster returns the cluster's registration with the dispatcher.
func (c *ChannelSource[object]) ForCluster(name multicluster.ClusterName, cl cluster.Cluster) (source.TypedSource[mcreconcile.Request], bool, error) {
	if c.handler == nil {
		return nil, false, errors.New("mcsource.Channel: no handler")
	}
	return &channelRegistration[object]{src: c, name: name, handler: c.handler(name, cl)}, true, nil
}

// String describes the source, for logs.
func (c *ChannelSource[object]) String() string {
	return fmt.Sprintf("channel source: %T", *new(object))
}

// channelRegistration is the source in one cluster: the controller records
// it with its engagement of the cluster, where the dispatcher finds it.
type channelRegistration[object client.Object] struct {
	src     *ChannelSource[object]
	name    multicluster.ClusterName
	handler handler.TypedEventHandler[object, mcreconcile.Request]
	target  atomic.Pointer[channelTarget] // set by Start
}

type channelTarget struct {
	ctx   context.Context
	queue workqueue.TypedRateLimitingInterface[mcreconcile.Request]
}

func (r *channelRegistration[object]) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
	c := r.src
	rec, ok := engagements.From(ctx)
	if !ok {
		return fmt.Errorf("mcsource.Channel: cluster %q: started by something other than a multi-cluster controller, which routes its events", r.name)
	}
	c.mu.Lock()
	if c.engaged != nil && c.engaged != rec {
		c.mu.Unlock()
		return errors.New("mcsource.Channel: the source already serves another controller")
	}
	c.engaged = rec
	r.target.Store(&channelTarget{ctx: ctx, queue: q})
	c.running++
	if c.stop == nil {
		c.stop = make(chan struct{})
		go c.dispatch(c.stop, rec)
	}
	c.mu.Unlock()
	context.AfterFunc(ctx, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.running--; c.running == 0 && c.stop != nil {
			close(c.stop)
			c.stop = nil
		}
	})
	return nil
}

// registration returns this source's running registration in the cluster
// engaged under name, nil if there is none.
func (c *ChannelSource[object]) registration(rec engagements.Record, name multicluster.ClusterName) (*channelRegistration[object], *channelTarget) {
	for _, s := range rec.StartedIn(name) {
		if r, ok := s.(*channelRegistration[object]); ok && r.src == c {
			if t := r.target.Load(); t != nil && t.ctx.Err() == nil {
				return r, t
			}
		}
	}
	return nil, nil
}

func (r *channelRegistration[object]) String() string {
	return fmt.Sprintf("channel source: %T in cluster %q", *new(object), r.name)
}

func (c *ChannelSource[object]) dispatch(stop chan struct{}, rec engagements.Record) {
	for {
		select {
		case <-stop:
			return
		case ev, ok := <-c.ch:
			if !ok {
				return
			}
			r, target := c.registration(rec, ev.ClusterName)
			if r == nil {
				metrics.DroppedRequests.WithLabelValues("channel-source", "cluster-not-engaged").Inc()
				log.Info("Dropping generic event for a cluster that is not engaged", "cluster", ev.ClusterName)
				continue
			}
			evt := event.TypedGenericEvent[object]{Object: ev.Object}
			if c.accepts(evt) {
				r.handler.Generic(target.ctx, evt, target.queue)
			}
		}
	}
}

func (c *ChannelSource[object]) accepts(evt event.TypedGenericEvent[object]) bool {
	for _, p := range c.predicates {
		if !p.Generic(evt) {
			return false
		}
	}
	return true
}
