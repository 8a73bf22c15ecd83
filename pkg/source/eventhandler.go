package source

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

var log = logf.Log.WithName("mcsource")

// NewEventHandler adapts informer callbacks to a typed handler: it builds
// controller-runtime events (unwrapping delete tombstones), applies the
// predicates and passes what remains to h with q.
func NewEventHandler[object client.Object, request comparable](ctx context.Context, q workqueue.TypedRateLimitingInterface[request], h handler.TypedEventHandler[object, request], predicates []predicate.TypedPredicate[object]) toolscache.ResourceEventHandler {
	return &eventHandler[object, request]{ctx: ctx, queue: q, handler: h, predicates: predicates}
}

type eventHandler[object client.Object, request comparable] struct {
	ctx        context.Context
	queue      workqueue.TypedRateLimitingInterface[request]
	handler    handler.TypedEventHandler[object, request]
	predicates []predicate.TypedPredicate[object]
}

func (e *eventHandler[object, request]) OnAdd(obj any, isInInitialList bool) {
	o, ok := obj.(object)
	if !ok {
		log.Error(nil, "OnAdd got an object of an unexpected type", "type", typeName(obj))
		return
	}
	evt := event.TypedCreateEvent[object]{Object: o, IsInInitialList: isInInitialList}
	for _, p := range e.predicates {
		if !p.Create(evt) {
			return
		}
	}
	e.handler.Create(e.ctx, evt, e.queue)
}

func (e *eventHandler[object, request]) OnUpdate(oldObj, newObj any) {
	o, ok := oldObj.(object)
	if !ok {
		log.Error(nil, "OnUpdate got an old object of an unexpected type", "type", typeName(oldObj))
		return
	}
	n, ok := newObj.(object)
	if !ok {
		log.Error(nil, "OnUpdate got a new object of an unexpected type", "type", typeName(newObj))
		return
	}
	evt := event.TypedUpdateEvent[object]{ObjectOld: o, ObjectNew: n}
	for _, p := range e.predicates {
		if !p.Update(evt) {
			return
		}
	}
	e.handler.Update(e.ctx, evt, e.queue)
}

func (e *eventHandler[object, request]) OnDelete(obj any) {
	var evt event.TypedDeleteEvent[object]
	// A delete observed only through a relist arrives as a tombstone holding
	// the last known state.
	if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		evt.DeleteStateUnknown = true
		obj = tombstone.Obj
	}
	o, ok := obj.(object)
	if !ok {
		log.Error(nil, "OnDelete got an object of an unexpected type", "type", typeName(obj))
		return
	}
	evt.Object = o
	for _, p := range e.predicates {
		if !p.Delete(evt) {
			return
		}
	}
	e.handler.Delete(e.ctx, evt, e.queue)
}

func typeName(obj any) string {
	if obj == nil {
		return "nil"
	}
	return fmt.Sprintf("%T", obj)
}
