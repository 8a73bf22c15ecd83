package file

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// members runs the lifecycle of the provider's clusters on top of
// pkgclusters.Clusters: one goroutine per cluster being added, retries with
// backoff, and the cancellation of instances that a newer configuration made
// obsolete. At most two instances of a name are alive: the engaged one and the
// one replacing it.
type members struct {
	clusters   *pkgclusters.Clusters[cluster.Cluster]
	opts       []cluster.Option
	minBackoff time.Duration
	maxBackoff time.Duration

	mu     sync.Mutex
	ctx    context.Context // the provider's run
	aware  multicluster.Aware
	log    logr.Logger
	byName map[multicluster.ClusterName]*member
	wg     sync.WaitGroup
}

type member struct {
	hash    string
	current *instance   // the configuration wanted now
	live    []*instance // every instance not yet cancelled, current included
}

type instance struct {
	hash    string
	ctx     context.Context
	cancel  context.CancelFunc
	engaged bool
}

// start binds members to the provider's run.
func (m *members) start(ctx context.Context, aware multicluster.Aware, log logr.Logger) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ctx, m.aware, m.log = ctx, aware, log
	m.byName = map[multicluster.ClusterName]*member{}
}

// hash returns the configuration hash wanted for name, if any.
func (m *members) hash(name multicluster.ClusterName) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mb, ok := m.byName[name]; ok {
		return mb.hash, true
	}
	return "", false
}

// names returns the names of every wanted cluster.
func (m *members) names() []multicluster.ClusterName {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]multicluster.ClusterName, 0, len(m.byName))
	for name := range m.byName {
		out = append(out, name)
	}
	return out
}

// set wants name to run with cfg, identified by hash. An unchanged hash does
// nothing; otherwise a new cluster is built and engaged in its own goroutine,
// replacing the running one once it is engaged. An attempt still in flight for
// an older configuration is abandoned.
func (m *members) set(name multicluster.ClusterName, hash string, cfg *rest.Config) {
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
	in := &instance{hash: hash, ctx: ictx, cancel: cancel}
	mb.hash, mb.current, mb.live = hash, in, append(kept, in)
	m.wg.Go(func() { m.run(name, in, cfg) })
}

// remove disengages name and abandons any attempt in flight.
func (m *members) remove(name multicluster.ClusterName) bool {
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
	m.clusters.Remove(name)
	return true
}

// wait waits for every goroutine started by set. Cancel the provider's run first.
func (m *members) wait() { m.wg.Wait() }

// run builds and engages one instance, retrying with backoff until it is
// engaged or abandoned.
func (m *members) run(name multicluster.ClusterName, in *instance, cfg *rest.Config) {
	log := m.log.WithValues("cluster", name)
	backoff := m.minBackoff
	for {
		err := m.attempt(name, in, cfg)
		if in.ctx.Err() != nil {
			return // abandoned: removed, superseded or the provider stopped
		}
		if err == nil {
			if m.engaged(name, in) {
				log.Info("Engaged cluster")
			}
			return
		}
		log.Error(err, "Failed to engage cluster, retrying", "retryIn", backoff.String())
		t := time.NewTimer(backoff)
		select {
		case <-in.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, m.maxBackoff)
	}
}

func (m *members) attempt(name multicluster.ClusterName, in *instance, cfg *rest.Config) error {
	if err := probe(in.ctx, cfg); err != nil {
		return fmt.Errorf("cluster %q: %w", name, err)
	}
	cl, err := cluster.New(rest.CopyConfig(cfg), m.opts...)
	if err != nil {
		return fmt.Errorf("cluster %q: creating cluster: %w", name, err)
	}
	return m.clusters.AddOrReplace(in.ctx, name, cl, m.aware)
}

// engaged makes in the only live instance of name, stopping the ones it
// replaces. It reports false if in was removed or superseded meanwhile.
func (m *members) engaged(name multicluster.ClusterName, in *instance) bool {
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
		return fmt.Errorf("server %s did not answer: %w", c.Host, err)
	}
	return nil
}
