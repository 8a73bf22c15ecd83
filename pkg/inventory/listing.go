package inventory

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// listing is what Listed waits for: the objects present when the caches
// synced, less those considered since; nil until the listing is taken, which
// is before any object is considered (Reconcile waits for it). Guarded by
// Kit.mu.
type listing struct {
	pending map[client.ObjectKey]bool
	done    bool
}

// list takes the listing once the caches have synced, then lets reconciles
// run. If it cannot, Listed is closed anyway, loudly: readiness must not
// wait for what nobody tracks.
func (k *Kit[T]) list(ctx context.Context) {
	defer close(k.started)
	pending, err := k.presentObjects(ctx)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		k.log.Error(err, "Readiness will not wait for the objects present at start-up")
		pending = map[client.ObjectKey]bool{}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pending = pending
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
	delete(k.pending, key)
	k.settleLocked()
}

func (k *Kit[T]) settleLocked() {
	if !k.done && k.pending != nil && len(k.pending) == 0 {
		k.done = true
		close(k.listed)
	}
}

// poll publishes Options.List's listing whenever Options.Watch, or a
// cluster that rejects its credentials, asks for it (relist).
func (k *Kit[T]) poll(ctx context.Context, log logr.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.relists:
			if ctx.Err() == nil {
				_ = k.publishListing(ctx, log)
			}
		}
	}
}

// every is the Watch of a List without one: a listing at once and every
// interval.
func every(interval time.Duration) func(context.Context, func()) error {
	return func(ctx context.Context, changed func()) error {
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			changed()
			select {
			case <-ctx.Done():
				return nil
			case <-ticker.C:
			}
		}
	}
}

// relist asks poll for a listing; requests made before it starts one are
// one.
func (k *Kit[T]) relist() {
	select {
	case k.relists <- struct{}{}:
	default:
	}
}

// publishListing lists the inventory and publishes what it lists. A failed
// listing keeps every cluster.
func (k *Kit[T]) publishListing(ctx context.Context, log logr.Logger) error {
	desired, err := k.opts.List(logf.IntoContext(ctx, log))
	if err != nil {
		log.Error(err, "Failed to list the inventory; keeping the clusters found before")
		return fmt.Errorf("%s: %w", k.opts.Name, err)
	}
	k.publishAll(log, desired)
	return nil
}

// publishAll publishes a listing: one name, one source, as in watch mode.
// Entries of one name are told apart by what they would publish (their
// hash), as a listing carries nothing else: the entry whose cluster is
// engaged under the name keeps it; the name of an engaged cluster with an
// entry that could not be read this time stays as it is (that entry may be
// its source); otherwise the entry listed first takes it. The others are
// skipped, reported once per change, until the holder is no longer listed.
func (k *Kit[T]) publishAll(log logr.Logger, desired []Desired) {
	entries := map[multicluster.ClusterName][]int{} // positions in desired, by name
	var names []multicluster.ClusterName            // in listing order
	for i, d := range desired {
		if err := clusters.ValidateClusterName(d.Name); err != nil {
			log.Error(err, "Skipping a listed cluster", "cluster", d.Name)
			continue
		}
		if entries[d.Name] == nil {
			names = append(names, d.Name)
		}
		entries[d.Name] = append(entries[d.Name], i)
	}
	for _, name := range names {
		holder := k.arbitrate(name, desired, entries[name])
		k.reportShared(log, name, desired, entries[name], holder)
		if d := desired[holder]; d.Config != nil {
			k.publish(log.WithValues("cluster", name), nil, nil, d)
		}
	}
	for _, name := range k.members.Names() {
		if entries[name] == nil && k.members.Remove(name) {
			log.Info("Disengaged cluster: the inventory no longer lists it", "cluster", name)
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pending = map[client.ObjectKey]bool{} // a listing has nothing to wait for
	k.settleLocked()
}

// arbitrate returns the position of the entry that holds name among the
// positions at of entries listing it (see publishAll).
func (k *Kit[T]) arbitrate(name multicluster.ClusterName, desired []Desired, at []int) int {
	if len(at) == 1 {
		return at[0]
	}
	if hash, engaged := k.members.Hash(name); engaged {
		for _, i := range at {
			if desired[i].Config != nil && desired[i].Hash == hash {
				return i
			}
		}
		for _, i := range at {
			if desired[i].Config == nil {
				return i
			}
		}
	}
	for _, i := range at {
		if desired[i].Config != nil {
			return i
		}
	}
	return at[0]
}

// reportShared reports the entries skipped for sharing name with the
// holder, once per change of what is listed under the name.
func (k *Kit[T]) reportShared(log logr.Logger, name multicluster.ClusterName, desired []Desired, at []int, holder int) {
	key := client.ObjectKey{Name: name} // in listing mode, reported is by name
	if len(at) < 2 {
		k.forgetReported(key)
		return
	}
	// What changes the report: the hashes listed under the name, and the
	// holder's. Compared, never logged: a hash is made from credentials.
	var hashes, positions []string
	for _, i := range at {
		hashes = append(hashes, desired[i].Hash)
		if i != holder {
			positions = append(positions, strconv.Itoa(i+1))
		}
	}
	slices.Sort(hashes) // a listing in another order is no change
	if !k.reportOnce(key, desired[holder].Hash+"\x00"+strings.Join(hashes, "\x00")) {
		return
	}
	log.Error(fmt.Errorf("cluster %q is listed %d times: entry %d of the listing holds the name; entries %s are skipped until it is no longer listed",
		name, len(at), holder+1, strings.Join(positions, ", ")),
		"Skipping listed clusters that share a name", "cluster", name, "reason", ReasonDuplicateName, "skipped", len(at)-1)
}
