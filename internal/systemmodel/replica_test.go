package systemmodel_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	provclusters "github.com/mcruntime/multicluster-runtime/providers/clusters"
	"github.com/mcruntime/multicluster-runtime/providers/multi"
	"github.com/mcruntime/multicluster-runtime/providers/namespace"
)

// kind is how a member enters a replica's engine: through which provider.
type kind int

const (
	kindLent     kind = iota // providers/clusters.Provider.Add: a pre-built cluster lent to the engine
	kindClusters             // pkg/clusters.Clusters[T].Add with the manager (the engine)
	kindAware                // pkg/clusters.Clusters[T].Add with an Aware that is not the manager
	kindBuilt                // pkg/clusters.Members.SetMember with a Build of the provider's own
	kindNS                   // providers/namespace: one virtual cluster per Namespace of a shared cluster
	kindMulti                // providers/multi, over a providers/clusters under the prefix "m"
	numKinds
)

var kindNames = [numKinds]string{"lent", "clusters", "aware", "built", "ns", "multi"}

func (k kind) String() string { return kindNames[k] }

// adds reports whether the application adds the kind's clusters with a call
// that returns an outcome (Add).
func (k kind) adds() bool {
	return k == kindLent || k == kindClusters || k == kindAware || k == kindMulti
}

// indexed reports whether indexes registered with the kind's provider go to
// each of its clusters (the namespace provider's go to its shared cache).
func (k kind) indexed() bool { return k != kindNS }

// builtProvider is the smallest provider with a Build of its own: it
// publishes its members through pkg/clusters.Members.SetMember.
type builtProvider struct {
	members pkgclusters.Members
	started chan struct{}
}

func (p *builtProvider) Start(ctx context.Context, aware multicluster.Aware) error {
	p.members.Start(ctx, aware, logr.Discard())
	close(p.started)
	<-ctx.Done()
	p.members.Wait()
	return nil
}

func (p *builtProvider) Get(ctx context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	return p.members.Get(ctx, name)
}

func (p *builtProvider) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	return p.members.IndexField(ctx, obj, field, extract)
}

var _ multicluster.ProviderRunnable = &builtProvider{}

// replica is one process of the controller: a fleet engine with its
// subscribers, and every kind of provider on it.
type replica struct {
	i int
	e *fleet.Engine

	subsMu sync.Mutex
	subs   []*tracker

	lent     *provclusters.Provider
	clusters pkgclusters.Clusters[*fakeCluster]
	aware    pkgclusters.Clusters[*fakeCluster]
	awareTr  *tracker
	built    *builtProvider
	shared   *sharedCluster
	ns       *namespace.Provider
	mp       *multi.Provider
	inner    *provclusters.Provider

	// indexes are the fields registered with each kind's provider, in order.
	indexes [numKinds][]string
}

func (r *replica) subscribers() []*tracker {
	r.subsMu.Lock()
	defer r.subsMu.Unlock()
	return append([]*tracker(nil), r.subs...)
}

func (r *replica) subscribe(tr *tracker) {
	r.subsMu.Lock()
	r.subs = append(r.subs, tr)
	r.subsMu.Unlock()
	r.e.Subscribe(tr)
}

// startReplica starts replica i's engine and providers within ctx; wg
// waits for them to return.
func (w *world) startReplica(ctx context.Context, i int, wg *sync.WaitGroup) *replica {
	log := w.log.WithValues("replica", i)
	r := &replica{i: i}
	r.e = fleet.New(fleet.Options{
		Logger:    log,
		Admission: admission{s: w.fences, r: i},
		Health: fleet.HealthOptions{Disabled: w.probesOff, Interval: 40 * time.Millisecond, Timeout: 60 * time.Millisecond,
			FailureThreshold: 2, SuccessThreshold: 1, MaxProbesPerSecond: -1},
		CacheSyncTimeout: 10 * time.Second,
		MinBackoff:       10 * time.Millisecond,
		MaxBackoff:       150 * time.Millisecond,
		DrainTimeout:     200 * time.Millisecond,
	})
	check := func(name multicluster.ClusterName) { w.checkEngagedHere(i, name) }
	r.subscribe(newTracker(check))
	r.awareTr = newTracker(nil)
	r.lent = provclusters.New()
	r.built = &builtProvider{started: make(chan struct{})}
	r.shared = newSharedCluster(fmt.Sprintf("shared-%d", i), w.srv)
	r.ns = namespace.New(r.shared)
	r.inner = provclusters.New()
	r.mp = multi.New(multi.Options{})
	if err := r.mp.AddProvider("m", r.inner); err != nil {
		w.t.Fatalf("replica %d: adding the multi provider's inner provider: %v", i, err)
	}
	run := func(what string, start func() error) {
		wg.Go(func() {
			if err := start(); err != nil && ctx.Err() == nil {
				w.v.add("run", "replica %d: %s returned: %v", i, what, err)
			}
		})
	}
	run("the engine", func() error { return r.e.Start(ctx) })
	run("the clusters provider", func() error { return r.lent.Start(ctx, r.e) })
	run("the built provider", func() error { return r.built.Start(ctx, r.e) })
	run("the namespace provider", func() error { return r.ns.Start(ctx, r.e) })
	run("the multi provider", func() error { return r.mp.Start(ctx, r.e) })
	<-r.lent.Listed()
	<-r.built.started
	<-r.mp.Listed()
	<-r.inner.Listed()
	return r
}

// add is how the application on r adds m's cluster cl: the call's outcome.
func (r *replica) add(ctx context.Context, m *member, cl *fakeCluster) error {
	switch m.kind {
	case kindLent:
		return r.lent.Add(ctx, m.name, cl)
	case kindClusters:
		return r.clusters.Add(ctx, m.name, cl, r.e)
	case kindAware:
		return r.aware.Add(ctx, m.name, cl, r.awareTr)
	case kindMulti:
		return r.inner.Add(ctx, m.name, cl)
	}
	panic(fmt.Sprintf("kind %s is not added", m.kind))
}

// publish has r's provider of m publish it (the kinds that are not added).
func (r *replica) publish(w *world, m *member) {
	switch m.kind {
	case kindBuilt:
		srv, broken, delay := w.srv, m.broken, m.syncDelay
		r.built.members.SetMember(fleet.Member{Name: m.name, Hash: "1", Build: func(ctx context.Context) (cluster.Cluster, error) {
			// Building takes a while: an ownership change meanwhile must
			// cancel it.
			select {
			case <-time.After(delay / 2):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			cl := &fakeCluster{name: m.name, host: m.host, srv: srv, broken: broken, syncDelay: delay / 2}
			w.keep(cl)
			return cl, nil
		}})
	case kindNS:
		r.shared.informer.create(m.name)
	default:
		panic(fmt.Sprintf("kind %s is not published", m.kind))
	}
}

// remove has the application or provider on r let go of m.
func (r *replica) remove(m *member) {
	switch m.kind {
	case kindLent:
		r.lent.Remove(m.name)
	case kindClusters:
		r.clusters.Remove(m.name)
	case kindAware:
		r.aware.Remove(m.name)
	case kindBuilt:
		r.built.members.Remove(m.name)
	case kindNS:
		r.shared.informer.remove(m.name)
	case kindMulti:
		r.inner.Remove(m.name)
	}
}

// providerGet is the Get of m's provider on r.
func (r *replica) providerGet(m *member) (cluster.Cluster, error) {
	ctx := context.Background()
	switch m.kind {
	case kindLent:
		return r.lent.Get(ctx, m.name)
	case kindClusters:
		return r.clusters.Get(ctx, m.name)
	case kindAware:
		return r.aware.Get(ctx, m.name)
	case kindBuilt:
		return r.built.Get(ctx, m.name)
	case kindNS:
		return r.ns.Get(ctx, m.name)
	case kindMulti:
		return r.mp.Get(ctx, m.engineName)
	}
	panic("unknown kind")
}

// index registers field with kind k's provider on r.
func (r *replica) index(ctx context.Context, k kind, field string) error {
	obj, extract := &corev1.ConfigMap{}, func(client.Object) []string { return nil }
	r.indexes[k] = append(r.indexes[k], field)
	switch k {
	case kindLent:
		return r.lent.IndexField(ctx, obj, field, extract)
	case kindClusters:
		return r.clusters.IndexField(ctx, obj, field, extract)
	case kindAware:
		return r.aware.IndexField(ctx, obj, field, extract)
	case kindBuilt:
		return r.built.IndexField(ctx, obj, field, extract)
	case kindNS:
		return r.ns.IndexField(ctx, obj, field, extract)
	case kindMulti:
		return r.mp.IndexField(ctx, obj, field, extract)
	}
	panic("unknown kind")
}
