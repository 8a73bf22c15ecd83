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
	o, ok := as[object](obj, "OnAdd got an object")
	if !ok {
		return
	}
	evt := event.TypedCreateEvent[object]{Object: o, IsInInitialList: isInInitialList}
	if admitted(e.predicates, func(p predicate.TypedPredicate[object]) bool { return p.Create(evt) }) {
		e.handler.Create(e.ctx, evt, e.queue)
	}
}

func (e *eventHandler[object, request]) OnUpdate(oldObj, newObj any) {
	o, ok := as[object](oldObj, "OnUpdate got an old object")
	if !ok {
		return
	}
	n, ok := as[object](newObj, "OnUpdate got a new object")
	if !ok {
		return
	}
	evt := event.TypedUpdateEvent[object]{ObjectOld: o, ObjectNew: n}
	if admitted(e.predicates, func(p predicate.TypedPredicate[object]) bool { return p.Update(evt) }) {
		e.handler.Update(e.ctx, evt, e.queue)
	}
}

func (e *eventHandler[object, request]) OnDelete(obj any) {
	var evt event.TypedDeleteEvent[object]
	// A delete observed only through a relist arrives as a tombstone holding
	// the last known state.
	if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		evt.DeleteStateUnknown = true
		obj = tombstone.Obj
	}
	o, ok := as[object](obj, "OnDelete got an object")
	if !ok {
		return
	}
	evt.Object = o
	if admitted(e.predicates, func(p predicate.TypedPredicate[object]) bool { return p.Delete(evt) }) {
		e.handler.Delete(e.ctx, evt, e.queue)
	}
}

// as asserts an informer's object to the handler's type; what it got
// otherwise is logged with what, and the event dropped.
func as[object client.Object](obj any, what string) (object, bool) {
	o, ok := obj.(object)
	if !ok {
		log.Error(nil, what+" of an unexpected type", "type", typeName(obj))
	}
	return o, ok
}

// admitted reports whether every predicate admits the event, asking them in
// order and stopping at the first that does not.
func admitted[object client.Object](predicates []predicate.TypedPredicate[object], admits func(predicate.TypedPredicate[object]) bool) bool {
	for _, p := range predicates {
		if !admits(p) {
			return false
		}
	}
	return true
}

func typeName(obj any) string {
	if obj == nil {
		return "nil"
	}
	return fmt.Sprintf("%T", obj)
}
