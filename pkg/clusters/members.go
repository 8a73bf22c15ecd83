package clusters

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/redact"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet/build"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Members is what a provider whose inventory yields rest.Configs (kubeconfig
// files, Secrets, Cluster API, ...) needs: it publishes "cluster name runs with
// this rest.Config" to the fleet engine of the Multi-Cluster Manager, which
// builds, starts, engages, probes, replaces and tears the clusters down. A
// provider calls Set when a cluster appears or its content changes, and Remove
// when it goes; Get, IndexField and ClusterNames answer for its clusters.
//
// Started with an Aware that is not the manager (a test's tracker, say),
// Members runs an engine of its own for that Aware.
type Members struct {
	// ClusterOptions are applied to every cluster built, after those of the
	// manager (see fleet.Constructor).
	ClusterOptions []cluster.Option
	// Refresh, if set, is called with a cluster's name when the cluster rejects
	// its credentials: the provider re-reads its source and calls Set again if
	// the content changed.
	Refresh func(name multicluster.ClusterName)

	mu      sync.Mutex
	ctx     context.Context // the provider's run
	pub     fleet.Publisher
	log     logr.Logger
	hashes  map[multicluster.ClusterName]wanted
	indexes []index
	// indexed: the clusters the indexes are applied to (see indexed.go).
	indexed map[*indexed]struct{}
	wg      sync.WaitGroup
}

// Start binds the members to the provider's run: clusters live within ctx and
// are published to aware if it is a fleet.Publisher (the manager, or a
// wrapper of it), else to an engine of their own that engages them with aware.
// When ctx ends, every member is removed. Set before Start does nothing.
func (m *Members) Start(ctx context.Context, aware multicluster.Aware, log logr.Logger) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ctx, m.log = ctx, log
	m.hashes = map[multicluster.ClusterName]wanted{}
	m.pub = fleet.DoorFor(aware, fleet.Options{Logger: log})
	context.AfterFunc(ctx, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		for name, w := range m.hashes {
			w.expiry.stop()
			m.pub.RemoveMember(name)
		}
		m.hashes = map[multicluster.ClusterName]wanted{}
		m.indexed = nil
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
	w, ok := m.hashes[name]
	return w.hash, ok
}

// Set wants name to run with cfg, identified by hash; report, if not nil,
// hears of every failed attempt and, with nil, of the engagement, and of a
// bearer token about to expire while its source gave no other (an
// *ExpiringCredentialsError, see ExpiryWarningShare; without report, it is
// logged). It reports whether name was wanted before (replaced) and whether
// a new cluster is built for it (changed), for the provider's log: an
// unchanged hash is not published again (the engine, which decides, would
// ignore it anyway).
//
// What cfg says is split in two (SplitCredentials): where the cluster is and
// who the controller is there. A change of where builds a new cluster, which
// replaces the running one once it is engaged. A change of who only — a
// rotated token, new basic credentials, a new client certificate — is
// applied to the running cluster in place: its next requests carry the new
// credentials, its caches and watches keep running, nothing is listed again
// and no object is reconciled again because of it. The new credentials are
// tried first (one request, see build.TryCredentials): the member rejecting them, the
// cluster keeps its working ones and report hears of the refusal once (a
// *RefusedCredentialsError). Set reports changed false, and the rotation
// or its refusal is logged. With no cluster running on these credentials
// (an attempt refused with the old ones waits out its backoff, the server was
// unreachable), Set publishes a new hash instead: the engine starts a new
// attempt with the new credentials at once.
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
	w, known := m.hashes[name]
	if known && w.hash == hash {
		repause := w.paused != o.paused
		w.source, w.paused = o.source, o.paused
		m.hashes[name] = w
		if repause && w.build != nil {
			// The same key again: the engine changes the pause only.
			m.pub.SetMember(m.memberLocked(name, w, report))
		}
		return true, false
	}
	where, who := SplitCredentials(cfg)
	// The new credentials join the recent ones: the member's words are
	// redacted of both (a request sent with the old ones may still fail).
	redact.Known.RememberConfig(name, cfg)
	key := "content:" + hash
	if h, ok := build.EndpointHash(where, who); ok {
		key = "endpoint:" + h
	}
	expiry := w.expiry
	rotated := known && w.creds != nil && w.key == key
	if rotated {
		if cl, running := m.pub.Lookup(name); running && build.RotatesWith(cl, w.creds) {
			// Tried before they replace the working ones (build.TryCredentials).
			w.trial = &credentialTrial{who: who, report: report}
			m.tryLocked(name, cl, w.trial)
		} else {
			// Nothing runs to rotate into: an attempt in flight or
			// waiting out its backoff (refused credentials, an
			// unreachable server) would try the new credentials only
			// at its next turn. A new hash starts one now.
			w.creds.Set(who)
			w.trial = nil
			w.published = fmt.Sprintf("%s@%d", key, w.creds.Generation())
			m.log.Info("New credentials for a cluster that is not running: a new attempt starts with them now", "cluster", name)
			rotated = false
		}
	} else {
		// A certificate that does not parse is left to client-go,
		// whose error the build reports.
		delete(m.indexed, w.prebuilt)
		w = wanted{key: key, published: key, creds: build.NewHolder(who, who.HasCert() && strings.HasPrefix(key, "endpoint:"))}
		w.build = (&builder{m: m, pub: m.pub, name: name, where: where, creds: w.creds}).build
	}
	w.hash, w.source, w.paused = hash, o.source, o.paused
	w.expiry = m.watchExpiry(name, who.BearerToken, report, expiry)
	m.hashes[name] = w
	// The same key again only updates the engine's Report, Refresh and pause.
	m.pub.SetMember(m.memberLocked(name, w, report))
	return known, !rotated
}

// memberLocked is the fleet member of w.
func (m *Members) memberLocked(name multicluster.ClusterName, w wanted, report func(error)) fleet.Member {
	return fleet.Member{Name: name, Hash: w.published, Report: report, Build: w.build, Paused: w.paused,
		Refresh: func() { m.refresh(name) }}
}

// source returns the source object last given for name, for its build.
func (m *Members) source(name multicluster.ClusterName) client.Object {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hashes[name].source
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
// Every index registered is applied before the engine starts a cluster: to
// a pre-built one new to the members once, to each one a Build builds; one
// registered later reaches it whenever it comes. It reports whether member
// was published: not before Start or after the provider's run, nor with the
// hash published already, nor when a newer call decided otherwise meanwhile.
func (m *Members) SetMember(member fleet.Member) bool {
	m.mu.Lock()
	name, hash := member.Name, member.Hash
	if m.ctx == nil || m.ctx.Err() != nil {
		m.mu.Unlock()
		return false
	}
	w, known := m.hashes[name]
	if known && w.hash == hash {
		m.mu.Unlock()
		return false
	}
	delete(m.indexed, w.prebuilt)
	if build := member.Build; build != nil {
		last := &builtCluster{}
		member.Build = func(ctx context.Context) (cluster.Cluster, error) {
			cl, err := build(ctx)
			if err != nil {
				return nil, err
			}
			return m.trackBuilt(ctx, last, name, cl)
		}
		m.hashes[name] = wanted{hash: hash, key: hash, published: hash}
		m.pub.SetMember(member)
		m.mu.Unlock()
		return true
	}
	x, n := m.trackLocked(name, member.Cluster)
	m.hashes[name] = wanted{hash: hash, key: hash, published: hash, prebuilt: x}
	ctx := m.ctx
	m.mu.Unlock()
	// Outside the lock: a cluster the application started already gets
	// its indexes through running informers.
	err := m.catchUp(ctx, x, n, -1)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hashes[name].prebuilt != x {
		return false // removed or replaced meanwhile: what was decided last stands
	}
	if err != nil {
		m.log.Error(err, "Failed to index cluster", "cluster", name)
	}
	m.pub.SetMember(member)
	return true
}

// builtCluster is the cluster a member's Build built last, guarded by m.mu:
// the one the indexes go to until the next build or the end of its life
// (forget, which forgets it then).
type builtCluster struct {
	x      *indexed
	forget func() bool
}

// trackBuilt makes cl, just built for name, the cluster of last that the
// indexes go to, and applies every index registered so far before the
// engine starts its cache; one registered later reaches it while it starts
// or runs. ctx is the member's life: the engine lets go of the cluster when
// it ends.
func (m *Members) trackBuilt(ctx context.Context, last *builtCluster, name multicluster.ClusterName, cl cluster.Cluster) (cluster.Cluster, error) {
	m.mu.Lock()
	delete(m.indexed, last.x)
	if last.forget != nil {
		last.forget() // a member rebuilt many times holds its last cluster only
	}
	x, n := m.trackLocked(name, cl)
	last.x, last.forget = x, context.AfterFunc(ctx, func() { m.untrack(x) })
	m.mu.Unlock()
	if err := m.catchUp(ctx, x, n, -1); err != nil {
		m.untrack(x)
		return nil, err
	}
	return cl, nil
}

// wanted is what the provider last published for a name.
type wanted struct {
	hash string // the provider's
	key  string // the endpoint's: what a new cluster is built for
	// published is the engine's: key, or key and a generation of creds
	// for a new attempt with credentials rotated while nothing ran.
	published string
	// creds holds the credentials of the clusters built for key; nil for
	// a pre-built cluster, as is build.
	creds *build.Holder
	build func(context.Context) (cluster.Cluster, error)
	// prebuilt is the pre-built cluster of SetCluster; nil for one built.
	prebuilt *indexed
	// trial: new credentials tried on the running cluster, or refused by
	// it; nil for none.
	trial *credentialTrial
	// expiry warns of the expiry of the bearer token; nil for none.
	expiry *expiryWatch
	// source and paused: see SetSource and SetPaused.
	source client.Object
	paused bool
}

// builder makes a member's Build: it builds from where, with the credentials
// creds holds at the time.
type builder struct {
	m     *Members
	pub   fleet.Publisher // asked for the manager's options at each build
	name  multicluster.ClusterName
	where *rest.Config
	creds *build.Holder
	// last is the cluster built last (see trackBuilt).
	last builtCluster
}

// build applies the settings hook, probes the server, builds the cluster
// and applies every index registered so far, before the engine starts its
// cache; one registered later reaches it while it starts or runs. ctx is
// the member's life: the engine lets go of its clusters when it ends.
func (b *builder) build(ctx context.Context) (cluster.Cluster, error) {
	// The manager's options come first: the provider's own are more
	// specific, and the hook's, for this cluster alone, more specific still.
	managers, settings := fleet.ConstructionOf(b.pub, b.name)
	opts := append(managers[:len(managers):len(managers)], b.m.ClusterOptions...)
	cl, err := build.FromEndpoint(ctx, b.name, b.where, b.creds, b.m.source(b.name), settings, opts)
	if err != nil {
		return nil, err
	}
	return b.m.trackBuilt(ctx, &b.last, b.name, cl)
}

// Remove disengages name and abandons any attempt in flight. It reports
// whether name was wanted.
func (m *Members) Remove(name multicluster.ClusterName) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.hashes[name]
	w.expiry.stop()
	delete(m.indexed, w.prebuilt)
	delete(m.hashes, name)
	if ok {
		m.pub.RemoveMember(name)
	}
	return ok
}

// Wait waits for the engine Members runs itself, if any, and for its
// trials of new credentials. Cancel the provider's run first.
func (m *Members) Wait() {
	m.wg.Wait()
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

// IndexField registers an index on every cluster of the members: built
// or handed over later, before its cache starts; running or starting now
// (engaged or not yet), through its informer's AddIndexers. It returns the
// errors of the engaged clusters that could not take it, each naming its
// cluster; that of a cluster not engaged (starting, or stopped and waiting
// for its next attempt, which gets every index) is logged.
func (m *Members) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	m.mu.Lock()
	m.indexes = append(m.indexes, index{obj: obj, field: field, extract: extract})
	at := len(m.indexes) - 1
	targets, pub, log := m.trackedLocked(), m.pub, m.log
	m.mu.Unlock()
	var errs []error
	for _, x := range targets {
		err := m.catchUp(ctx, x, at+1, at)
		if err == nil {
			continue
		}
		err = multicluster.WithCluster(x.name, err)
		if cl, engaged := pub.Lookup(x.name); engaged && cl == x.cl {
			errs = append(errs, err)
			continue
		}
		log.Info("A cluster that is not engaged could not take an index: if it is engaged, its lists by this field fail", "cluster", x.name, "error", err.Error())
	}
	return errors.Join(errs...)
}
