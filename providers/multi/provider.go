package multi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcfleet "github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet/build"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

var (
	_ multicluster.Provider         = &Provider{}
	_ multicluster.ProviderRunnable = &Provider{}
	_ multicluster.ListingProvider  = &Provider{}
)

// DefaultSeparator joins a prefix and a cluster name when
// Options.Separator is empty.
const DefaultSeparator = "#"

// Options configure a Provider.
type Options struct {
	// Separator joins a provider's prefix and the names of its clusters:
	// "<prefix><Separator><name>". Defaults to DefaultSeparator. Prefixes may
	// not contain it.
	Separator string
	// LoggerSuffix, if set, is added to the name of the provider's logger
	// ("multi-provider.<LoggerSuffix>"), to tell two multi providers apart.
	LoggerSuffix string
	// ChannelSize is the upstream design's size of the buffer that carried
	// inner providers' clusters to the manager. Here they reach the fleet
	// engine directly, with nothing to size: Start fails if it is set, so
	// that a program tuning it learns that it tunes nothing.
	ChannelSize int
}

var _ mcmanager.ClusterHealthChecker = &Provider{}

// Provider composes providers under name prefixes.
type Provider struct {
	sep         string
	channelSize int // Options.ChannelSize, refused by Start
	log         logr.Logger
	mgr         mcmanager.Manager // SetupWithManager's, for inner providers added later

	mu        sync.Mutex
	providers map[string]*innerProvider
	indexes   []index
	ctx       context.Context // the run's, once started
	fleet     mcfleet.Door    // where inner providers' clusters go, once started
	listed    chan struct{}   // closed once the providers registered at Start have listed
}

type index struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
}

// innerProvider is one inner provider and its run.
type innerProvider struct {
	prefix   string
	provider multicluster.Provider
	ready    bool // its indexes are applied: it may start
	removed  bool

	ctx    context.Context // ends when removed or when the multi provider stops; set on start
	cancel context.CancelFunc
	done   chan struct{} // closed when a runnable provider's Start returned
}

// New returns a Provider without inner providers.
func New(opts Options) *Provider {
	if opts.Separator == "" {
		opts.Separator = DefaultSeparator
	}
	log := logf.Log.WithName("multi-provider")
	if opts.LoggerSuffix != "" {
		log = log.WithName(opts.LoggerSuffix)
	}
	return &Provider{
		sep:         opts.Separator,
		channelSize: opts.ChannelSize,
		log:         log,
		providers:   map[string]*innerProvider{},
		listed:      make(chan struct{}),
	}
}

// ErrProviderExists is returned, wrapped, by AddProvider for a prefix in use.
var ErrProviderExists = errors.New("provider prefix already in use")

// AddProvider registers p under prefix, before or after the multi provider
// started. Every index registered so far is applied to p first; then, if the
// multi provider runs and p is a multicluster.ProviderRunnable, p is started.
func (m *Provider) AddProvider(prefix string, p multicluster.Provider) error {
	switch {
	case prefix == "":
		return errors.New("multi provider: empty prefix")
	case strings.Contains(prefix, m.sep):
		return fmt.Errorf("multi provider: prefix %q contains the separator %q", prefix, m.sep)
	case p == nil:
		return fmt.Errorf("multi provider: prefix %q: nil provider", prefix)
	}
	if err := pkgclusters.ValidateClusterName(prefix); err != nil {
		return fmt.Errorf("multi provider: prefix: %w", err)
	}
	m.mu.Lock()
	if _, ok := m.providers[prefix]; ok {
		m.mu.Unlock()
		return fmt.Errorf("multi provider: prefix %q: %w", prefix, ErrProviderExists)
	}
	ip := &innerProvider{prefix: prefix, provider: p}
	m.providers[prefix] = ip
	// Indexes registered from now on reach ip through IndexField; these
	// are the ones before it. Each reaches it exactly once.
	indexes := slices.Clone(m.indexes)
	ctx := m.ctx
	m.mu.Unlock()

	if ctx == nil {
		ctx = context.Background()
	}
	for _, idx := range indexes {
		if err := p.IndexField(ctx, idx.obj, idx.field, idx.extract); err != nil {
			m.mu.Lock()
			if m.providers[prefix] == ip {
				delete(m.providers, prefix)
			}
			m.mu.Unlock()
			return fmt.Errorf("multi provider: prefix %q: indexing %T by %q: %w", prefix, idx.obj, idx.field, err)
		}
	}

	if err := m.setUp(ctx, prefix, p); err != nil {
		m.mu.Lock()
		if m.providers[prefix] == ip {
			delete(m.providers, prefix)
		}
		m.mu.Unlock()
		return err
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	ip.ready = true
	m.startLocked(ip)
	return nil
}

// RemoveProvider stops the provider registered under prefix and disengages
// all its clusters. It returns once a runnable provider's Start returned.
// Removing an unknown prefix does nothing.
func (m *Provider) RemoveProvider(prefix string) {
	m.mu.Lock()
	ip, ok := m.providers[prefix]
	var cancel context.CancelFunc
	var done chan struct{}
	if ok {
		delete(m.providers, prefix)
		ip.removed = true
		cancel, done = ip.cancel, ip.done
	}
	m.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if done != nil {
		<-done
	}
}

// ProviderNames returns the prefixes of the registered providers, sorted.
func (m *Provider) ProviderNames() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.providers))
	for prefix := range m.providers {
		names = append(names, prefix)
	}
	slices.Sort(names)
	return names
}

// GetProvider returns the provider registered under prefix.
func (m *Provider) GetProvider(prefix string) (multicluster.Provider, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ip, ok := m.providers[prefix]
	if !ok {
		return nil, false
	}
	return ip.provider, true
}

// Start starts every runnable inner provider, and those added later, until
// ctx is done. It then waits for them to return.
func (m *Provider) Start(ctx context.Context, aware multicluster.Aware) error {
	if m.channelSize != 0 {
		return errChannelSize
	}
	m.mu.Lock()
	if m.ctx != nil {
		m.mu.Unlock()
		return fmt.Errorf("multi provider: %w", multicluster.ErrAlreadyStarted)
	}
	// The fleet engine keeps the one record of the clusters: the manager's,
	// or one of the multi provider's own for an Aware that is not a
	// fleet.Publisher (a test's tracker, say).
	door := mcfleet.DoorFor(aware, mcfleet.Options{Logger: m.log})
	m.ctx, m.fleet = ctx, door
	var listing []*innerProvider
	for _, ip := range m.providers {
		m.startLocked(ip)
		if _, ok := ip.provider.(multicluster.ListingProvider); ok && ip.done != nil {
			listing = append(listing, ip)
		}
	}
	m.mu.Unlock()
	go m.waitListed(ctx, listing)

	<-ctx.Done()

	m.mu.Lock()
	var running []chan struct{}
	for _, ip := range m.providers {
		if ip.done != nil {
			running = append(running, ip.done)
		}
	}
	m.mu.Unlock()
	for _, done := range running {
		<-done
	}
	if own, ok := door.(*mcfleet.OwnEngine); ok {
		own.Wait() // the inner providers' clusters left with their providers
	}
	return nil
}

// Listed is closed once every inner provider registered when Start ran
// that is a multicluster.ListingProvider has listed its clusters, or was
// removed (multicluster.ListingProvider). Providers added later do not hold
// back a readiness the replica has already reached. It stays open if the
// multi provider stops before.
func (m *Provider) Listed() <-chan struct{} { return m.listed }

// waitListed closes m.listed once every provider of listing has listed or
// was removed.
func (m *Provider) waitListed(ctx context.Context, listing []*innerProvider) {
	for _, ip := range listing {
		select {
		case <-ip.provider.(multicluster.ListingProvider).Listed():
		case <-ip.ctx.Done(): // removed, or the multi provider stopped
		}
	}
	if ctx.Err() == nil {
		close(m.listed)
	}
}

// startLocked starts ip if it is ready, the multi provider runs, and it has
// not started yet. m.mu is held.
func (m *Provider) startLocked(ip *innerProvider) {
	if m.ctx == nil || !ip.ready || ip.removed || ip.ctx != nil {
		return
	}
	ip.ctx, ip.cancel = context.WithCancel(m.ctx)
	runnable, ok := ip.provider.(multicluster.ProviderRunnable)
	if !ok {
		return
	}
	ip.done = make(chan struct{})
	aware := &prefixed{inner: ip, sep: m.sep, fleet: m.fleet}
	log := m.log.WithValues("provider", ip.prefix)
	go func() {
		defer close(ip.done)
		if err := runnable.Start(ip.ctx, aware); err != nil && ip.ctx.Err() == nil {
			log.Error(err, "Provider stopped")
		}
	}()
}

// Get returns the cluster "<prefix><sep><name>" from the provider registered
// under prefix, or an error wrapping multicluster.ErrClusterNotFound.
func (m *Provider) Get(ctx context.Context, clusterName multicluster.ClusterName) (cluster.Cluster, error) {
	prefix, inner, ok := strings.Cut(clusterName, m.sep)
	if !ok {
		return nil, fmt.Errorf("cluster %q: name has no provider prefix (separator %q): %w", clusterName, m.sep, multicluster.ErrClusterNotFound)
	}
	m.mu.Lock()
	ip, ok := m.providers[prefix]
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("cluster %q: unknown provider prefix %q: %w", clusterName, prefix, multicluster.ErrClusterNotFound)
	}
	cl, err := ip.provider.Get(ctx, inner)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", clusterName, err)
	}
	return cl, nil
}

// ClusterHealthCheck passes the health checks of the inner providers on
// (mcmanager.ClusterHealthChecker): each cluster "<prefix><sep><name>" is
// checked by its provider's check, if it has one, under the inner name.
// Inner providers are added while running, so the check is always there;
// for a cluster whose provider has none it only looks the provider up.
func (m *Provider) ClusterHealthCheck() func(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	return func(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
		prefix, inner, ok := strings.Cut(name, m.sep)
		if !ok {
			return nil // not one of ours: Engage'd by someone else
		}
		m.mu.Lock()
		ip, ok := m.providers[prefix]
		m.mu.Unlock()
		if !ok {
			return nil
		}
		hc, ok := ip.provider.(mcmanager.ClusterHealthChecker)
		if !ok {
			return nil
		}
		if check := hc.ClusterHealthCheck(); check != nil {
			return check(ctx, inner, cl)
		}
		return nil
	}
}

// IndexField registers an index with every inner provider, and with every
// provider added later, exactly once each.
func (m *Provider) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	m.mu.Lock()
	m.indexes = append(m.indexes, index{obj: obj, field: field, extract: extract})
	inners := make([]*innerProvider, 0, len(m.providers))
	for _, ip := range m.providers {
		inners = append(inners, ip)
	}
	m.mu.Unlock()

	var errs []error
	for _, ip := range inners {
		if err := ip.provider.IndexField(ctx, obj, field, extract); err != nil {
			errs = append(errs, fmt.Errorf("provider %q: indexing %T by %q: %w", ip.prefix, obj, field, err))
		}
	}
	return errors.Join(errs...)
}

// prefixed is what inner providers are started with: it hands their
// clusters to the fleet engine under prefixed names. That is all the multi
// provider adds; the engine keeps the clusters. Engagements end when the
// inner provider is removed, even if it does not end them itself; published
// members are removed by the inner provider when its context ends, which
// removing it does.
type prefixed struct {
	inner *innerProvider
	sep   string
	fleet mcfleet.Door
}

var (
	_ mcfleet.Door        = &prefixed{}
	_ mcfleet.Constructor = &prefixed{}
)

func (p *prefixed) name(name multicluster.ClusterName) multicluster.ClusterName {
	return p.inner.prefix + p.sep + name
}

func (p *prefixed) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	full := p.name(name)
	if err := pkgclusters.ValidateClusterName(full); err != nil {
		return fmt.Errorf("provider %q: %w", p.inner.prefix, err)
	}
	ectx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(p.inner.ctx, cancel)
	context.AfterFunc(ectx, func() { stop() })
	if err := p.fleet.Engage(ectx, full, cl); err != nil {
		cancel()
		return err
	}
	return nil
}

func (p *prefixed) SetMember(m mcfleet.Member) {
	m.Name = p.name(m.Name)
	p.fleet.SetMember(m)
}

// Construction returns the options and settings hook the door holds for
// the cluster under its prefixed name.
func (p *prefixed) Construction(name multicluster.ClusterName) ([]cluster.Option, build.SettingsFunc) {
	return mcfleet.ConstructionOf(p.fleet, p.name(name))
}

func (p *prefixed) RemoveMember(name multicluster.ClusterName) {
	p.fleet.RemoveMember(p.name(name))
}

func (p *prefixed) Lookup(name multicluster.ClusterName) (cluster.Cluster, bool) {
	return p.fleet.Lookup(p.name(name))
}

// State returns the engine's state of an inner provider's cluster:
// pkg/clusters.Clusters asks it, to return at once from Add for a cluster
// this replica does not run (yet).
func (p *prefixed) State(name multicluster.ClusterName) (mcfleet.State, bool) {
	switch f := p.fleet.(type) {
	case interface{ Fleet() *mcfleet.Engine }:
		return f.Fleet().State(p.name(name))
	case *mcfleet.Engine:
		return f.State(p.name(name))
	}
	return "", false
}
