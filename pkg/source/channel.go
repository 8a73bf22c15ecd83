package source

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

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
// event's cluster. Events for a cluster that is not engaged are dropped.
// One goroutine reads ch while at least one cluster is engaged.
func Channel[object client.Object](ch <-chan GenericEvent[object], h mchandler.TypedEventHandlerFunc[object, mcreconcile.Request], predicates ...predicate.TypedPredicate[object]) *ChannelSource[object] {
	return &ChannelSource[object]{ch: ch, handler: h, predicates: predicates, clusters: map[multicluster.ClusterName]*channelTarget[object]{}}
}

// ChannelSource is the Source returned by Channel.
type ChannelSource[object client.Object] struct {
	ch         <-chan GenericEvent[object]
	handler    mchandler.TypedEventHandlerFunc[object, mcreconcile.Request]
	predicates []predicate.TypedPredicate[object]

	mu       sync.Mutex
	clusters map[multicluster.ClusterName]*channelTarget[object]
	stop     chan struct{} // stops the running dispatcher; nil when none runs
}

type channelTarget[object client.Object] struct {
	ctx     context.Context
	queue   workqueue.TypedRateLimitingInterface[mcreconcile.Request]
	handler handler.TypedEventHandler[object, mcreconcile.Request]
}

var _ Source = &ChannelSource[client.Object]{}

// ForCluster returns the cluster's registration with the dispatcher.
func (c *ChannelSource[object]) ForCluster(name multicluster.ClusterName, cl cluster.Cluster) (source.TypedSource[mcreconcile.Request], error) {
	if c.handler == nil {
		return nil, errors.New("mcsource.Channel: no handler")
	}
	return &channelRegistration[object]{src: c, name: name, handler: c.handler(name, cl)}, nil
}

// String describes the source, for logs.
func (c *ChannelSource[object]) String() string {
	return fmt.Sprintf("channel source: %T", *new(object))
}

type channelRegistration[object client.Object] struct {
	src     *ChannelSource[object]
	name    multicluster.ClusterName
	handler handler.TypedEventHandler[object, mcreconcile.Request]
}

func (r *channelRegistration[object]) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
	c := r.src
	target := &channelTarget[object]{ctx: ctx, queue: q, handler: r.handler}
	c.mu.Lock()
	c.clusters[r.name] = target
	if c.stop == nil {
		c.stop = make(chan struct{})
		go c.dispatch(c.stop)
	}
	c.mu.Unlock()
	context.AfterFunc(ctx, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.clusters[r.name] == target {
			delete(c.clusters, r.name)
		}
		if len(c.clusters) == 0 && c.stop != nil {
			close(c.stop)
			c.stop = nil
		}
	})
	return nil
}

func (r *channelRegistration[object]) String() string {
	return fmt.Sprintf("channel source: %T in cluster %q", *new(object), r.name)
}

func (c *ChannelSource[object]) dispatch(stop chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case ev, ok := <-c.ch:
			if !ok {
				return
			}
			c.mu.Lock()
			target := c.clusters[ev.ClusterName]
			c.mu.Unlock()
			if target == nil {
				metrics.DroppedRequests.WithLabelValues("channel-source", "cluster-not-engaged").Inc()
				log.Info("Dropping generic event for a cluster that is not engaged", "cluster", ev.ClusterName)
				continue
			}
			evt := event.TypedGenericEvent[object]{Object: ev.Object}
			if c.accepts(evt) {
				target.handler.Generic(target.ctx, evt, target.queue)
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
