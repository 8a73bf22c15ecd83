package clusters

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Members is what a provider whose inventory yields rest.Configs (kubeconfig
// files, Secrets, Cluster API, ...) needs: it publishes "cluster name runs with
// this rest.Config" to the fleet engine of the Multi-Cluster Manager, which
// builds, starts, engages, probes, replaces, rotates and tears the clusters
// down. A provider calls Set when a cluster appears or its content changes,
// and Remove when it goes; Get, IndexField and ClusterNames answer for its
// clusters. Members holds the names it published and their hashes, and the
// provider's indexes; every other fact of a cluster is the engine's.
//
// Started with an Aware that is not the manager (a test's tracker, say),
// Members runs an engine of its own for that Aware.
type Members struct {
	// ClusterOptions are applied to every cluster built from a Set's
	// rest.Config, after those of the manager (see fleet.Member.Options).
	ClusterOptions []cluster.Option
	// Refresh, if set, is called with a cluster's name when the cluster rejects
	// its credentials: the provider re-reads its source and calls Set again if
	// the content changed.
	Refresh func(name multicluster.ClusterName)

	mu      sync.Mutex
	ctx     context.Context // the provider's run
	pub     fleet.Publisher
	log     logr.Logger
	hashes  map[multicluster.ClusterName]string // the hash last published for each name
	indexes fleet.Indexes
}

// Start binds the members to the provider's run: clusters live within ctx and
// are published to aware if it is a fleet.Publisher (the manager, or a
// wrapper of it), else to an engine of their own that engages them with aware.
// When ctx ends, every member is removed. Set before Start does nothing.
func (m *Members) Start(ctx context.Context, aware multicluster.Aware, log logr.Logger) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ctx, m.log = ctx, log
	m.hashes = map[multicluster.ClusterName]string{}
	m.pub = fleet.DoorFor(aware, fleet.Options{Logger: log})
	context.AfterFunc(ctx, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		for name := range m.hashes {
			m.pub.RemoveMember(name)
		}
		m.hashes = map[multicluster.ClusterName]string{}
	})
}

// Names returns the names of every wanted cluster, engaged or not.
func (m *Members) Names() []multicluster.ClusterName {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.hashes))
}

// Hash returns the configuration hash wanted for name, if any.
func (m *Members) Hash(name multicluster.ClusterName) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	hash, ok := m.hashes[name]
	return hash, ok
}

// Set wants name to run with cfg, identified by hash (fleet.Member.Config);
// report, if not nil, hears of every failed attempt and, with nil, of the
// engagement, of a bearer token about to expire while its source gave no
// other (a *ExpiringCredentialsError; without report, it is logged), and of
// new credentials the member refused (a *RefusedCredentialsError). It
// reports whether name was wanted before (replaced) and whether hash is new
// for it (changed), for the provider's log.
//
// The engine compares the endpoint cfg names with the running cluster's: a
// change of where the cluster is builds a new cluster, which replaces the
// running one once it is engaged; a change of who the controller is there
// only — a rotated token, new basic credentials, a new client certificate —
// is applied to the running cluster in place, once the member accepts them
// (see fleet.Member.Config): its caches and watches keep running, nothing
// is listed again and no object is reconciled again because of it.
//
// Set and Remove reach the engine in the order they were called (under the
// members' lock): what the provider decided last for a name is what the
// engine holds.
//
// opts add the source object the settings hook sees (SetSource) and the
// pause (SetPaused): publishing the same hash with another pause changes the
// pause only, and the source is remembered for the next build.
func (m *Members) Set(name multicluster.ClusterName, hash string, cfg *rest.Config, report func(error), opts ...SetOption) (replaced, changed bool) {
	var o setOptions
	for _, opt := range opts {
		opt(&o)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx == nil || m.ctx.Err() != nil {
		return false, false
	}
	old, known := m.hashes[name]
	m.hashes[name] = hash
	m.pub.SetMember(fleet.Member{Name: name, Hash: hash, Config: cfg, Source: o.source, Paused: o.paused,
		Options: m.ClusterOptions, Report: report, Refresh: m.refreshOf(name), Indexes: &m.indexes})
	return known, !known || old != hash
}

// refreshOf is the member name's Refresh: the provider's, if any.
func (m *Members) refreshOf(name multicluster.ClusterName) func() {
	if m.Refresh == nil {
		return nil
	}
	return func() { m.Refresh(name) }
}

// SetCluster wants name to run the pre-built cluster cl: see SetMember.
func (m *Members) SetCluster(name multicluster.ClusterName, cl cluster.Cluster, report func(error)) {
	m.SetMember(fleet.Member{Name: name, Hash: fmt.Sprintf("%p", cl), Cluster: cl, Report: report})
}

// SetMember wants member as the provider made it: a Build of its own,
// which the engine calls for every start of the cluster, as it builds any
// member, or a pre-built Cluster, which the engine starts unless the
// application already did and never stops while the member is wanted (see
// fleet.Member). Publishing the same name and Hash again changes nothing.
// Every index registered reaches the member's clusters (see
// fleet.Indexes). It reports whether member was published: not before
// Start or after the provider's run, nor with the hash published already.
func (m *Members) SetMember(member fleet.Member) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx == nil || m.ctx.Err() != nil {
		return false
	}
	if hash, known := m.hashes[member.Name]; known && hash == member.Hash {
		return false
	}
	m.hashes[member.Name] = member.Hash
	member.Indexes = &m.indexes
	m.pub.SetMember(member)
	return true
}

// Remove disengages name and abandons any attempt in flight. It reports
// whether name was wanted.
func (m *Members) Remove(name multicluster.ClusterName) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.hashes[name]
	delete(m.hashes, name)
	if ok {
		m.pub.RemoveMember(name)
	}
	return ok
}

// Wait waits for the engine Members runs itself, if any. Cancel the
// provider's run first.
func (m *Members) Wait() {
	m.mu.Lock()
	own, _ := m.pub.(*fleet.OwnEngine)
	m.mu.Unlock()
	if own != nil {
		own.Wait()
	}
}

// View is the read side of a Members, for providers to embed: it answers
// multicluster.Provider's Get and IndexField, and ClusterNames.
type View struct{ m *Members }

// View returns the read side of m.
func (m *Members) View() View { return View{m: m} }

// Get returns the engaged cluster of name, or an error wrapping
// multicluster.ErrClusterNotFound.
func (v View) Get(ctx context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	return v.m.Get(ctx, name)
}

// IndexField registers an index on every engaged cluster and every cluster
// built later, before its cache starts.
func (v View) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	return v.m.IndexField(ctx, obj, field, extract)
}

// ClusterNames returns the names of the engaged clusters, sorted.
func (v View) ClusterNames() []multicluster.ClusterName { return v.m.ClusterNames() }

// Get returns the engaged cluster of name, or an error wrapping
// multicluster.ErrClusterNotFound.
func (m *Members) Get(_ context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	m.mu.Lock()
	_, ok := m.hashes[name]
	pub := m.pub
	m.mu.Unlock()
	if ok {
		if cl, engaged := pub.Lookup(name); engaged {
			return cl, nil
		}
	}
	return nil, multicluster.WithCluster(name, multicluster.ErrClusterNotFound)
}

// ClusterNames returns the names of the engaged clusters, sorted.
func (m *Members) ClusterNames() []multicluster.ClusterName {
	var out []multicluster.ClusterName
	for _, name := range m.Names() {
		if _, err := m.Get(context.Background(), name); err == nil {
			out = append(out, name)
		}
	}
	return out
}

// IndexField registers an index on every cluster of the members: see
// fleet.Indexes.Add.
func (m *Members) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	m.mu.Lock()
	log := m.log
	m.mu.Unlock()
	return m.indexes.Add(ctx, log, obj, field, extract)
}
