package fleetreader

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Manager is what a Reader needs of the Multi-Cluster Manager: Add, which
// engages an Aware runnable with every cluster engaged now and later, and the
// host manager for the scheme and the logger. mcmanager.Manager satisfies it.
type Manager interface {
	Add(manager.Runnable) error
	GetLocalManager() manager.Manager
}

// Reader reads objects across every cluster engaged on this replica. Create
// it with New; it is safe for concurrent use.
type Reader struct {
	log    logr.Logger
	scheme *runtime.Scheme

	mu      sync.Mutex // guards members, types and indexes; never held while reading
	members map[multicluster.ClusterName]*member
	types   map[typeKey]client.Object // declared types: a prototype of each
	indexes map[indexKey]*index

	// engaged is the members sorted by name, replaced (never changed) under
	// mu, so that reads take no lock.
	engaged atomic.Pointer[[]*member]
}

var (
	_ multicluster.Aware             = &Reader{}
	_ manager.Runnable               = &Reader{}
	_ manager.LeaderElectionRunnable = &Reader{}
)

// New returns a Reader and adds it to mgr, which engages it with every
// cluster. Create one Reader per manager, before or after the manager starts.
func New(mgr Manager) (*Reader, error) {
	host := mgr.GetLocalManager()
	if host == nil {
		return nil, errors.New("fleetreader: the manager has no host manager")
	}
	r := &Reader{
		log:     host.GetLogger().WithName("fleetreader"),
		scheme:  host.GetScheme(),
		members: map[multicluster.ClusterName]*member{},
		types:   map[typeKey]client.Object{},
		indexes: map[indexKey]*index{},
	}
	r.engaged.Store(&[]*member{})
	if err := mgr.Add(r); err != nil {
		return nil, fmt.Errorf("fleetreader: adding the reader to the manager: %w", err)
	}
	return r, nil
}

// Start blocks until ctx ends; the Reader works through Engage.
func (r *Reader) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// NeedLeaderElection is false: every replica reads the clusters it runs.
func (r *Reader) NeedLeaderElection() bool { return false }

// member is one engaged cluster, as long as its engagement lasts.
type member struct {
	name multicluster.ClusterName
	cl   cluster.Cluster
	ctx  context.Context // the engagement: done once the cluster left or disconnected

	mu        sync.Mutex
	informers map[typeKey]cache.Informer
	attached  map[*index]bool
	unsynced  map[typeKey]bool // types already logged as not synced yet
}

func (m *member) live() bool { return m.ctx.Err() == nil }

// Engage starts reading the cluster: it asks the cluster's cache for the
// informer of every declared type (shared with the controllers that watch
// it) and feeds the fleet-wide indexes from them. A type that cannot be
// watched in this cluster (no such resource, forbidden) is logged naming the
// cluster and the type, and left out of that cluster's reads; the other types
// and clusters are unaffected. The cluster is read until ctx ends.
func (r *Reader) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	if cl == nil {
		return fmt.Errorf("fleetreader: cluster %q: nil cluster", name)
	}
	r.mu.Lock()
	if old, ok := r.members[name]; ok && old.cl == cl && old.live() {
		r.mu.Unlock()
		return nil
	}
	m := &member{name: name, cl: cl, ctx: ctx} // maps are made on first use: a Reader that reads nothing costs little per cluster
	r.members[name] = m
	r.publish()
	types := make(map[typeKey]client.Object, len(r.types))
	for k, obj := range r.types {
		types[k] = obj
	}
	indexes := make([]*index, 0, len(r.indexes))
	for _, idx := range r.indexes {
		indexes = append(indexes, idx)
	}
	r.mu.Unlock()

	context.AfterFunc(ctx, func() {
		r.mu.Lock()
		if r.members[name] == m {
			delete(r.members, name)
			r.publish()
		}
		r.mu.Unlock()
	})
	for k, obj := range types {
		_, _ = r.informer(m, k, obj)
	}
	for _, idx := range indexes {
		r.attach(m, idx)
	}
	return nil
}

// publish replaces the sorted snapshot of members. Callers hold r.mu.
func (r *Reader) publish() {
	ms := make([]*member, 0, len(r.members))
	for _, m := range r.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *member) int { return strings.Compare(a.name, b.name) })
	r.engaged.Store(&ms)
}

// Clusters returns the names of the clusters read now, sorted.
func (r *Reader) Clusters() []multicluster.ClusterName {
	var names []multicluster.ClusterName
	for _, m := range *r.engaged.Load() {
		if m.live() {
			names = append(names, m.name)
		}
	}
	return names
}

// Informer declares obj's type readable across the fleet: every engaged
// cluster, now and later, is asked for its informer of the type. A cluster
// whose controllers already watch the type shares their informer; otherwise
// one watch per cluster starts, which is what reading the type costs.
func (r *Reader) Informer(ctx context.Context, obj client.Object) error {
	k, err := r.keyOf(obj)
	if err != nil {
		return err
	}
	r.declare(k, obj)
	for _, m := range *r.engaged.Load() {
		_, _ = r.informer(m, k, obj)
	}
	return nil
}

// declare records a type as readable.
func (r *Reader) declare(k typeKey, obj client.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.types[k]; !ok {
		r.types[k] = obj.DeepCopyObject().(client.Object)
	}
}

// informer returns m's informer for the type, asking the cluster's cache
// for it the first time. Failures are logged naming the cluster and type.
func (r *Reader) informer(m *member, k typeKey, obj client.Object) (cache.Informer, error) {
	m.mu.Lock()
	inf, ok := m.informers[k]
	m.mu.Unlock()
	if ok {
		return inf, nil
	}
	if !m.live() {
		return nil, fmt.Errorf("cluster %q: %w", m.name, multicluster.ErrClusterNotFound)
	}
	inf, err := m.cl.GetCache().GetInformer(m.ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		err = fmt.Errorf("cluster %q: getting the informer for %s: %w", m.name, k, err)
		r.log.Error(err, "Type left out of this cluster's fleet reads", "cluster", m.name, "type", k.String())
		return nil, err
	}
	m.mu.Lock()
	if prev, ok := m.informers[k]; ok {
		inf = prev
	} else {
		if m.informers == nil {
			m.informers = map[typeKey]cache.Informer{}
		}
		m.informers[k] = inf
	}
	m.mu.Unlock()
	return inf, nil
}

// readable returns m's informer for the type if it has its initial list; a
// cluster that has not is left out of reads, logged once per type.
func (r *Reader) readable(m *member, k typeKey) cache.Informer {
	m.mu.Lock()
	inf, ok := m.informers[k]
	m.mu.Unlock()
	if ok && inf.HasSynced() {
		return inf
	}
	m.mu.Lock()
	logged := m.unsynced[k]
	if m.unsynced == nil {
		m.unsynced = map[typeKey]bool{}
	}
	m.unsynced[k] = true
	m.mu.Unlock()
	if !logged {
		reason := "its informer has not finished its initial list"
		if !ok {
			reason = "the type cannot be watched in it (see the earlier error)"
		}
		r.log.Info("Leaving a cluster out of fleet reads until it has the type", "cluster", m.name, "type", k.String(), "reason", reason)
	}
	return nil
}

// typeKey identifies a cached type: an informer is per GVK and per form
// (typed, unstructured, metadata-only), as in controller-runtime's cache.
type typeKey struct {
	gvk  schema.GroupVersionKind
	form string
}

func (k typeKey) String() string {
	s := k.gvk.Kind
	if k.gvk.Group != "" {
		s += "." + k.gvk.Group
	}
	s += "/" + k.gvk.Version
	if k.form != "" {
		s += " (" + k.form + ")"
	}
	return s
}

func (r *Reader) keyOf(obj runtime.Object) (typeKey, error) {
	gvk, err := apiutil.GVKForObject(obj, r.scheme)
	if err != nil {
		return typeKey{}, fmt.Errorf("fleetreader: type of %T: %w", obj, err)
	}
	k := typeKey{gvk: gvk}
	switch obj.(type) {
	case runtime.Unstructured:
		k.form = "unstructured"
	case *metav1.PartialObjectMetadata, *metav1.PartialObjectMetadataList:
		k.form = "metadata"
	}
	if _, isList := obj.(client.ObjectList); isList {
		k.gvk.Kind = strings.TrimSuffix(k.gvk.Kind, "List")
	}
	return k, nil
}

// declared returns the key of a list's item type, or an error naming the
// type if it was not declared.
func (r *Reader) declared(obj runtime.Object) (typeKey, error) {
	k, err := r.keyOf(obj)
	if err != nil {
		return k, err
	}
	r.mu.Lock()
	_, ok := r.types[k]
	r.mu.Unlock()
	if !ok {
		return k, fmt.Errorf("fleetreader: %s is not cached fleet-wide: declare it with Reader.Informer or Reader.IndexField (reads never fall back to live lists of every cluster)", k)
	}
	return k, nil
}

// Get reads one object of one cluster from that cluster's cache. A cluster
// that is not engaged on this replica yields an error wrapping
// multicluster.ErrClusterNotFound.
func (r *Reader) Get(ctx context.Context, clusterName multicluster.ClusterName, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	k, err := r.declared(obj)
	if err != nil {
		return err
	}
	r.mu.Lock()
	m := r.members[clusterName]
	r.mu.Unlock()
	if m == nil || !m.live() {
		return fmt.Errorf("fleetreader: cluster %q: %w", clusterName, multicluster.ErrClusterNotFound)
	}
	if _, err := r.informer(m, k, r.prototype(k, obj)); err != nil {
		return err
	}
	if err := m.cl.GetCache().Get(ctx, key, obj, opts...); err != nil {
		return fmt.Errorf("cluster %q: %w", clusterName, err)
	}
	return nil
}

func (r *Reader) prototype(k typeKey, fallback client.Object) client.Object {
	r.mu.Lock()
	defer r.mu.Unlock()
	if obj, ok := r.types[k]; ok {
		return obj
	}
	return fallback
}
