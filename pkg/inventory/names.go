package inventory

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/internal/redact"
	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// names is one name, one source: which object holds each cluster name,
// which objects wait for a name another holds, and the terminal problem last
// reported for each object (in listing mode, for each name that several
// entries share). Guarded by Kit.mu.
type names struct {
	holder   map[multicluster.ClusterName]client.ObjectKey
	held     map[client.ObjectKey]multicluster.ClusterName
	waiting  map[multicluster.ClusterName]map[client.ObjectKey]bool
	reported map[client.ObjectKey]string
}

func (n *names) init() {
	n.holder = map[multicluster.ClusterName]client.ObjectKey{}
	n.held = map[client.ObjectKey]multicluster.ClusterName{}
	n.waiting = map[multicluster.ClusterName]map[client.ObjectKey]bool{}
	n.reported = map[client.ObjectKey]string{}
}

// claim gives name to the object of key, unless the name is invalid or
// another object holds it; then the object waits, and is considered again
// when the holder lets go. A name the object held before is let go first:
// an object that names another cluster no longer asks for the old one, even
// while it waits for the new one.
func (k *Kit[T]) claim(log logr.Logger, key client.ObjectKey, name multicluster.ClusterName) error {
	if err := clusters.ValidateClusterName(name); err != nil {
		k.release(log, key, fmt.Sprintf("its %s names no valid cluster", k.kind))
		return Refused(k.opts.InvalidNameReason, fmt.Errorf("%s %s: %w", k.kind, key, err))
	}
	k.mu.Lock()
	old, had := k.held[key]
	k.mu.Unlock()
	if had && old != name {
		k.release(log.WithValues("previousName", old), key, fmt.Sprintf("its %s now names another cluster", k.kind))
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if holder, ok := k.holder[name]; ok && holder != key {
		k.unwaitLocked(key)
		if k.waiting[name] == nil {
			k.waiting[name] = map[client.ObjectKey]bool{}
		}
		k.waiting[name][key] = true
		return Refused(ReasonDuplicateName, fmt.Errorf("cluster %q is already engaged from %s %s: waiting for it to let go of the name", name, k.kind, holder))
	}
	k.unwaitLocked(key)
	k.held[key], k.holder[name] = name, key
	delete(k.reported, key)
	return nil
}

// release disengages the cluster the object of key holds, if any, and
// considers again the objects that wait for its name.
//
// The cluster is withdrawn before the name is free (under the kit's lock):
// with several workers, an object that claims the name next publishes its
// cluster after the withdrawal, never before it.
func (k *Kit[T]) release(log logr.Logger, key client.ObjectKey, why string) {
	k.mu.Lock()
	k.unwaitLocked(key)
	name, ok := k.held[key]
	delete(k.held, key)
	var waiting map[client.ObjectKey]bool
	mine := ok && k.holder[name] == key
	if mine {
		delete(k.holder, name)
		waiting = k.waiting[name]
		delete(k.waiting, name)
	}
	removed := mine && k.members.Remove(name)
	q := k.queue
	k.mu.Unlock()
	if removed {
		log.Info("Disengaged cluster: "+why, "cluster", name)
	}
	for other := range waiting {
		if other != key && q != nil {
			q.Add(reconcile.Request{NamespacedName: other})
		}
	}
}

func (k *Kit[T]) unwaitLocked(key client.ObjectKey) {
	for name, keys := range k.waiting {
		delete(keys, key)
		if len(keys) == 0 {
			delete(k.waiting, name)
		}
	}
}

// requeue considers again the object that holds name.
func (k *Kit[T]) requeue(name multicluster.ClusterName) {
	k.mu.Lock()
	key, ok := k.holder[name]
	q := k.queue
	k.mu.Unlock()
	if ok && q != nil {
		q.Add(reconcile.Request{NamespacedName: key})
	}
}

// SourceOf returns the key of the object the named cluster comes from.
func (k *Kit[T]) SourceOf(name multicluster.ClusterName) (client.ObjectKey, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	key, ok := k.holder[name]
	return key, ok
}

// Source returns the object the named cluster comes from, as the kit's
// cache holds it now.
func (k *Kit[T]) Source(ctx context.Context, name multicluster.ClusterName) (T, bool) {
	key, ok := k.SourceOf(name)
	if !ok {
		var zero T
		return zero, false
	}
	obj, found, err := k.get(ctx, key)
	return obj, found && err == nil
}

// reportOnce records seen as the problem of key, and reports whether it is
// new.
func (k *Kit[T]) reportOnce(key client.ObjectKey, seen string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	again := k.reported[key] == seen
	k.reported[key] = seen
	return !again
}

func (k *Kit[T]) forgetReported(key client.ObjectKey) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.reported, key)
}

// ref keeps what an Event needs of obj, with its type set so that the
// manager's scheme need not know it, and none of its data.
func (k *Kit[T]) ref(obj T) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: k.gvk.GroupVersion().String(), Kind: k.gvk.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: obj.GetName(),
			UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion()},
	}
}

// redactErr keeps URLs, Authorization values and words of sensitive out of
// what is logged and recorded, keeping a Problem's reason.
func redactErr(err error, sensitive []byte) error {
	if p, ok := err.(*Problem); ok {
		return &Problem{Reason: p.Reason, Err: redact.Bounded(redact.Error(p.Err, sensitive)), Terminal: p.Terminal}
	}
	return redact.Bounded(redact.Error(err, sensitive))
}
