package inventory

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// listing is what Listed waits for: the objects present when the caches
// synced, less those considered since. Guarded by Kit.mu.
type listing struct {
	seen    map[client.ObjectKey]bool // considered before the listing was taken; nil after
	pending map[client.ObjectKey]bool // taken but not all considered yet
	done    bool
}

// list takes the listing once the caches have synced. If it cannot, Listed
// is closed anyway, loudly: readiness must not wait for what nobody tracks.
func (k *Kit[T]) list(ctx context.Context) {
	pending, err := k.presentObjects(ctx)
	if ctx.Err() != nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		k.log.Error(err, "Readiness will not wait for the objects present at start-up")
		pending = nil
	}
	for key := range k.seen {
		delete(pending, key)
	}
	k.seen, k.pending = nil, pending
	k.settleLocked()
}

func (k *Kit[T]) presentObjects(ctx context.Context) (map[client.ObjectKey]bool, error) {
	present := map[client.ObjectKey]bool{}
	for _, c := range k.caches {
		if !c.WaitForCacheSync(ctx) {
			return nil, fmt.Errorf("the %s cache did not sync", k.kind)
		}
		obj, err := k.scheme.New(k.gvk.GroupVersion().WithKind(k.kind + "List"))
		list, ok := obj.(client.ObjectList)
		if err != nil || !ok {
			return nil, fmt.Errorf("no list type for %s: %v", k.kind, err)
		}
		if err := c.List(ctx, list); err != nil {
			return nil, fmt.Errorf("listing %s: %w", k.kind, err)
		}
		if err := meta.EachListItem(list, func(o runtime.Object) error {
			if m, ok := o.(client.Object); ok {
				present[client.ObjectKeyFromObject(m)] = true
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return present, nil
}

// considered records that the object of key has been reconciled once.
func (k *Kit[T]) considered(key client.ObjectKey) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.seen != nil {
		k.seen[key] = true
		return
	}
	delete(k.pending, key)
	k.settleLocked()
}

func (k *Kit[T]) settleLocked() {
	if !k.done && k.seen == nil && len(k.pending) == 0 {
		k.done, k.pending = true, nil
		close(k.listed)
	}
}

// poll publishes Options.List's listing every Options.Interval.
func (k *Kit[T]) poll(ctx context.Context, log logr.Logger) {
	ticker := time.NewTicker(k.opts.Interval)
	defer ticker.Stop()
	for {
		if desired, err := k.opts.List(ctx); err != nil {
			log.Error(err, "Failed to list the inventory; keeping the clusters found before")
		} else {
			k.publishAll(log, desired)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func (k *Kit[T]) publishAll(log logr.Logger, desired []Desired) {
	listed := map[multicluster.ClusterName]bool{}
	for _, d := range desired {
		if err := clusters.ValidateClusterName(d.Name); err != nil {
			log.Error(err, "Skipping a listed cluster", "cluster", d.Name)
			continue
		}
		listed[d.Name] = true
		if d.Config != nil {
			k.publish(log.WithValues("cluster", d.Name), nil, d)
		}
	}
	for _, name := range k.members.Names() {
		if !listed[name] && k.members.Remove(name) {
			log.Info("Disengaged cluster: the inventory no longer lists it", "cluster", name)
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.seen = nil
	k.settleLocked()
}
