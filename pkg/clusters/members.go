package clusters

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/redact"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Default backoffs between attempts to engage a member.
const (
	DefaultMinBackoff = time.Second
	DefaultMaxBackoff = 2 * time.Minute
)

// Members turns a provider's desired state, "cluster name runs with this
// rest.Config", into running, engaged clusters, on top of Clusters: it probes
// the server, builds the cluster (NewCluster), adds it, and retries with
// backoff until it is engaged, in one goroutine per cluster being added, so
// that a slow or broken member never holds back the others. A new
// configuration for a name replaces the engaged cluster once it is engaged
// itself; at most two instances of a name are alive: the engaged one and the
// one replacing it.
//
// Providers whose inventory yields kubeconfigs (files, Secrets, Cluster API,
// ...) call Set and Remove as their inventory changes.
type Members struct {
	// Clusters is where the members run. Required.
	Clusters *Clusters[cluster.Cluster]
	// ClusterOptions are applied to every cluster built.
	ClusterOptions []cluster.Option
	// MinBackoff and MaxBackoff bound the wait between failed attempts.
	// Default DefaultMinBackoff and DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration

	mu     sync.Mutex
	ctx    context.Context // the provider's run
	aware  multicluster.Aware
	log    logr.Logger
	byName map[multicluster.ClusterName]*member
	wg     sync.WaitGroup
}

// member is one name's desired configuration and its live instances.
type member struct {
	hash    string
	current *instance   // the configuration wanted now
	live    []*instance // every instance not yet cancelled, current included
}

// instance is one attempt at running a configuration.
type instance struct {
	report  func(err error) // told of every failed attempt, and of success with nil
	hash    string
	ctx     context.Context
	cancel  context.CancelFunc
	engaged bool
}

// Start binds the members to the provider's run: clusters live within ctx and
// are engaged with aware. Set before Start does nothing.
func (m *Members) Start(ctx context.Context, aware multicluster.Aware, log logr.Logger) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ctx, m.aware, m.log = ctx, aware, log
	m.byName = map[multicluster.ClusterName]*member{}
	if m.MinBackoff <= 0 {
		m.MinBackoff = DefaultMinBackoff
	}
	if m.MaxBackoff < m.MinBackoff {
		m.MaxBackoff = max(DefaultMaxBackoff, m.MinBackoff)
	}
}

// Names returns the names of every wanted cluster, engaged or not.
func (m *Members) Names() []multicluster.ClusterName {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]multicluster.ClusterName, 0, len(m.byName))
	for name := range m.byName {
		out = append(out, name)
	}
	return out
}

// Hash returns the configuration hash wanted for name, if any.
func (m *Members) Hash(name multicluster.ClusterName) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mb, ok := m.byName[name]; ok {
		return mb.hash, true
	}
	return "", false
}

// Set wants name to run with cfg, identified by hash; report, if not nil,
// hears of every failed attempt and, with nil, of the engagement. An unchanged hash does
// nothing; otherwise a new cluster is built and engaged in its own goroutine,
// replacing the running one once it is engaged. An attempt still in flight for
// an older configuration is abandoned.
func (m *Members) Set(name multicluster.ClusterName, hash string, cfg *rest.Config, report func(error)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx == nil || m.ctx.Err() != nil {
		return
	}
	mb, ok := m.byName[name]
	if ok && mb.hash == hash {
		return
	}
	if !ok {
		mb = &member{}
		m.byName[name] = mb
	}
	// A replacement that has not engaged yet is obsolete; an engaged one keeps
	// serving until the new configuration is engaged.
	kept := mb.live[:0]
	for _, in := range mb.live {
		if in.engaged {
			kept = append(kept, in)
		} else {
			in.cancel()
		}
	}
	ictx, cancel := context.WithCancel(m.ctx)
	in := &instance{report: report, hash: hash, ctx: ictx, cancel: cancel}
	mb.hash, mb.current, mb.live = hash, in, append(kept, in)
	m.wg.Go(func() { m.run(name, in, cfg) })
}

// Remove disengages name and abandons any attempt in flight. It reports
// whether name was wanted.
func (m *Members) Remove(name multicluster.ClusterName) bool {
	m.mu.Lock()
	mb, ok := m.byName[name]
	delete(m.byName, name)
	m.mu.Unlock()
	if !ok {
		return false
	}
	for _, in := range mb.live {
		in.cancel()
	}
	m.Clusters.Remove(name)
	return true
}

// Wait waits for every goroutine started by Set. Cancel the provider's run first.
func (m *Members) Wait() { m.wg.Wait() }

// run builds and engages one instance, retrying with backoff until it is
// engaged or abandoned.
func (m *Members) run(name multicluster.ClusterName, in *instance, cfg *rest.Config) {
	log := m.log.WithValues("cluster", name)
	backoff := m.MinBackoff
	for {
		err := m.attempt(name, in, cfg)
		if in.ctx.Err() != nil {
			return // abandoned: removed, superseded or the provider stopped
		}
		if err == nil {
			if m.engaged(name, in) {
				log.Info("Engaged cluster")
				in.notify(nil)
			}
			return
		}
		log.Error(redact.Err(err), "Failed to engage cluster, retrying", "retryIn", backoff.String())
		in.notify(err)
		t := time.NewTimer(backoff)
		select {
		case <-in.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, m.MaxBackoff)
	}
}

func (m *Members) attempt(name multicluster.ClusterName, in *instance, cfg *rest.Config) error {
	if err := probe(in.ctx, cfg); err != nil {
		return fmt.Errorf("cluster %q: %w", name, err)
	}
	cl, err := NewCluster(rest.CopyConfig(cfg), m.ClusterOptions...)
	if err != nil {
		return fmt.Errorf("cluster %q: creating cluster: %w", name, err)
	}
	return m.Clusters.AddOrReplace(in.ctx, name, cl, m.aware)
}

func (in *instance) notify(err error) {
	if in.report != nil {
		in.report(err)
	}
}

// engaged makes in the only live instance of name, stopping the ones it
// replaces. It reports false if in was removed or superseded meanwhile.
func (m *Members) engaged(name multicluster.ClusterName, in *instance) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	mb, ok := m.byName[name]
	if !ok || mb.current != in {
		in.cancel() // removed or superseded while engaging
		return false
	}
	in.engaged = true
	for _, other := range mb.live {
		if other != in {
			other.cancel()
		}
	}
	mb.live = []*instance{in}
	return true
}

// probeTimeout bounds the reachability check made before a cluster is built.
const probeTimeout = 10 * time.Second

// probe checks that the server answers and accepts the credentials: without
// it, a cluster whose server is down would engage (its cache has nothing to
// sync yet) and only fail later, in every controller.
func probe(ctx context.Context, cfg *rest.Config) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	c := rest.CopyConfig(cfg)
	c.Timeout = probeTimeout
	dc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return fmt.Errorf("creating discovery client: %w", err)
	}
	if err := dc.RESTClient().Get().AbsPath("/version").Do(ctx).Error(); err != nil {
		return fmt.Errorf("server %s did not answer: %w", redact.URL(c.Host), err)
	}
	return nil
}
