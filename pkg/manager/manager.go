package manager

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	mccontext "github.com/mcruntime/multicluster-runtime/pkg/context"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet/build"
	"github.com/mcruntime/multicluster-runtime/pkg/fleetreader"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// LocalCluster is the name of the host cluster.
const LocalCluster multicluster.ClusterName = ""

// Options are controller-runtime's manager options; they configure the host
// cluster's manager.
type Options = manager.Options

// Manager is the Multi-Cluster Manager.
type Manager interface {
	// Add adds a runnable to the host manager. A runnable that is also
	// multicluster.Aware is engaged with every cluster engaged now and later.
	Add(manager.Runnable) error

	// Start runs the host manager and, if the provider has a discovery loop
	// (multicluster.ProviderRunnable), the provider. It blocks until ctx is done.
	Start(ctx context.Context) error

	// GetCluster returns an engaged cluster; "" is the host cluster. A name that
	// is not engaged yields an error wrapping multicluster.ErrClusterNotFound.
	GetCluster(ctx context.Context, name multicluster.ClusterName) (cluster.Cluster, error)

	// GetManager returns a manager whose cluster methods (GetClient, GetCache,
	// ...) are those of the named cluster, for controller-runtime components
	// that expect a manager.Manager.
	GetManager(ctx context.Context, name multicluster.ClusterName) (manager.Manager, error)

	// ClusterFromContext returns the cluster named in ctx (see pkg/context).
	ClusterFromContext(ctx context.Context) (cluster.Cluster, error)

	// GetLocalManager returns the host cluster's manager.
	GetLocalManager() manager.Manager

	// GetProvider returns the provider, nil in single-cluster mode.
	GetProvider() multicluster.Provider

	// GetFieldIndexer returns an indexer that registers an index on the host
	// cluster and, through the provider, on every provider cluster now and later.
	GetFieldIndexer() client.FieldIndexer

	// GetFleetReader returns the manager's fleet reader (pkg/fleetreader),
	// created on first use: List, Get and indexes across every engaged cluster.
	GetFleetReader() (*fleetreader.Reader, error)

	// Engage engages a cluster with every Aware runnable. Providers call it;
	// cancelling ctx disengages the cluster.
	multicluster.Aware

	// Elected is closed when this manager is elected leader (or at once without
	// leader election).
	Elected() <-chan struct{}
	// AddHealthzCheck adds a health check to the host manager.
	AddHealthzCheck(name string, check healthz.Checker) error
	// AddReadyzCheck adds a readiness check to the host manager.
	AddReadyzCheck(name string, check healthz.Checker) error
	// AddMetricsServerExtraHandler adds a handler to the metrics server.
	AddMetricsServerExtraHandler(path string, handler http.Handler) error
	// GetWebhookServer returns the host manager's webhook server.
	GetWebhookServer() webhook.Server
	// GetLogger returns the manager's logger.
	GetLogger() logr.Logger
	// GetControllerOptions returns the controller defaults of the host manager.
	GetControllerOptions() config.Controller
}

// New returns a Multi-Cluster Manager for the host cluster at config. provider
// may be nil: the manager then runs controllers against the host cluster alone.
func New(config *rest.Config, provider multicluster.Provider, opts Options, mcOpts ...Option) (Manager, error) {
	mgr, err := manager.New(config, opts)
	if err != nil {
		return nil, err
	}
	return WithMultiCluster(mgr, provider, mcOpts...)
}

// WithMultiCluster wraps an existing controller-runtime manager. It adds the
// fleet engine and, if the provider has a discovery loop, the provider to
// mgr's runnables, and registers the readyz check "clusters" with mgr.
func WithMultiCluster(mgr manager.Manager, provider multicluster.Provider, mcOpts ...Option) (Manager, error) {
	if mgr == nil {
		return nil, errors.New("mcmanager: nil manager")
	}
	var o options
	for _, opt := range mcOpts {
		opt(&o)
	}
	m := &mcManager{
		Manager:  mgr,
		provider: provider,
	}
	engineOpts := fleet.Options{
		Logger:           mgr.GetLogger().WithName("fleet"),
		Health:           withProviderCheck(o.health, provider),
		CacheSyncTimeout: o.cacheSyncTimeout,
		ListingTimeout:   o.listingTimeout,
		ClusterOptions:   o.clusterOptions,
		Settings:         o.clusterSettings,
	}
	if lister, ok := provider.(multicluster.ListingProvider); ok {
		engineOpts.Listed = lister.Listed()
	}
	if o.sharding != nil {
		adm, err := o.sharding(mgr)
		if err != nil {
			return nil, fmt.Errorf("mcmanager: sharding: %w", err)
		}
		engineOpts.Admission = adm
	}
	if o.reconcileSeries > 0 {
		series := &metrics.SeriesCap{Max: o.reconcileSeries}
		m.reconcileSeries = series
		// A cluster that leaves this replica frees its place under the cap.
		engineOpts.OnRelease = func(name multicluster.ClusterName) {
			if series.Release(name) {
				metrics.Reconciles.DeletePartialMatch(map[string]string{"cluster": name})
			}
		}
	}
	m.fleet = fleet.New(engineOpts)
	if err := mgr.Add(m.fleet); err != nil {
		return nil, fmt.Errorf("mcmanager: adding the fleet engine: %w", err)
	}
	if engineOpts.Admission != nil {
		if err := m.setupHostWork(engineOpts.Admission); err != nil {
			return nil, fmt.Errorf("mcmanager: sharding: %w", err)
		}
	}
	if err := mgr.AddReadyzCheck(ReadyzCheckName, m.fleet.Ready); err != nil {
		return nil, fmt.Errorf("mcmanager: adding the readyz check %q: %w", ReadyzCheckName, err)
	}
	if err := m.serveStatus(o.statusPath); err != nil {
		return nil, err
	}
	if runnable, ok := provider.(multicluster.ProviderRunnable); ok {
		if err := mgr.Add(&providerRunnable{provider: runnable, aware: m}); err != nil {
			return nil, fmt.Errorf("mcmanager: adding provider: %w", err)
		}
	}
	return m, nil
}

// ReadyzCheckName is the name of the readiness check the manager registers: it
// passes once a provider that is a multicluster.ListingProvider has listed
// its clusters (bounded by WithListingTimeout) and every cluster known then
// that this replica owns is engaged and synced, or has been declared
// disconnected.
const ReadyzCheckName = "clusters"

type mcManager struct {
	manager.Manager // the host; its cluster methods are not part of Manager
	provider        multicluster.Provider
	fleet           *fleet.Engine
	reconcileSeries *metrics.SeriesCap // nil unless WithPerClusterReconcileMetrics
	fleetReader     fleetReaderOnce
	// host runs the host's work on the replica that owns it; nil without
	// sharding (see hostwork.go), as is adm, the coordinator.
	host  *hostWork
	adm   hostAdmission
	local *hostManager // GetLocalManager under sharding
}

// ReconcileRecorder is implemented by the Multi-Cluster Manager: controllers
// report each reconcile's outcome, counted per cluster when the manager was
// created WithPerClusterReconcileMetrics.
type ReconcileRecorder interface {
	RecordReconcile(controller string, cluster multicluster.ClusterName, result reconcile.Result, err error)
}

// RecordReconcile counts one reconcile in multicluster_reconcile_total, if
// per-cluster reconcile metrics are on and the cluster is within their cap.
func (m *mcManager) RecordReconcile(controller string, cluster multicluster.ClusterName, res reconcile.Result, err error) {
	if m.reconcileSeries == nil || !m.reconcileSeries.Admit(cluster) {
		return
	}
	result := "success"
	switch {
	case err != nil:
		result = "error"
	case res.RequeueAfter > 0:
		result = "requeue"
	}
	metrics.Reconciles.WithLabelValues(controller, cluster, result).Inc()
}

var (
	_ Manager            = &mcManager{}
	_ fleet.Publisher    = &mcManager{}
	_ FleetOwner         = &mcManager{}
	_ ClusterPauser      = &mcManager{}
	_ multicluster.Aware = &mcManager{}
)

// ClusterPauser is implemented by the Multi-Cluster Manager: pause a cluster
// without removing it ("stop touching cluster X while we repair it"). A
// paused cluster stays engaged and its caches keep running, so resuming
// costs no relist; every multi-cluster controller holds its requests,
// deduplicated, neither dropped nor reconciled, and reconciles each once
// when it is resumed; GetCluster still answers it (a reconcile of another
// cluster may read it); readiness does not wait for it. The pause is logged
// once and shown as multicluster_cluster_paused{cluster}. A pause from code
// applies on this replica: under sharding, pause from the inventory
// (fleet.Member.Paused, which providers set from their source) for it to
// follow the cluster to its next owner. See fleet.Engine.SetPaused.
type ClusterPauser interface {
	PauseCluster(name multicluster.ClusterName)
	ResumeCluster(name multicluster.ClusterName)
}

func (m *mcManager) PauseCluster(name multicluster.ClusterName)  { m.fleet.SetPaused(name, true) }
func (m *mcManager) ResumeCluster(name multicluster.ClusterName) { m.fleet.SetPaused(name, false) }

// FleetOwner is implemented by the Multi-Cluster Manager: Fleet returns the
// engine that owns every cluster's lifecycle, for components that need a
// cluster's state (controllers deciding whether to wait for a joining cluster).
type FleetOwner interface {
	Fleet() *fleet.Engine
}

func (m *mcManager) Fleet() *fleet.Engine                    { return m.fleet }
func (m *mcManager) GetLocalManager() manager.Manager        { return m.localManager() }
func (m *mcManager) GetProvider() multicluster.Provider      { return m.provider }
func (m *mcManager) GetFieldIndexer() client.FieldIndexer    { return &fleetIndexer{m: m} }
func (m *mcManager) GetControllerOptions() config.Controller { return m.Manager.GetControllerOptions() }
func (m *mcManager) Start(ctx context.Context) error         { return m.Manager.Start(ctx) }
func (m *mcManager) GetWebhookServer() webhook.Server        { return m.Manager.GetWebhookServer() }
func (m *mcManager) GetLogger() logr.Logger                  { return m.Manager.GetLogger() }
func (m *mcManager) Elected() <-chan struct{}                { return m.Manager.Elected() }
func (m *mcManager) AddHealthzCheck(n string, c healthz.Checker) error {
	return m.Manager.AddHealthzCheck(n, c)
}
func (m *mcManager) AddReadyzCheck(n string, c healthz.Checker) error {
	return m.Manager.AddReadyzCheck(n, c)
}
func (m *mcManager) AddMetricsServerExtraHandler(path string, h http.Handler) error {
	return m.Manager.AddMetricsServerExtraHandler(path, h)
}

// Add adds r to the host manager and, if r is multicluster.Aware, subscribes
// it to the fleet: it is engaged with every cluster engaged so far and every
// cluster engaged later. Under sharding, a runnable that is not Aware and
// needs leader election in controller-runtime's sense runs on the host's
// owner alone (see WithSharding).
func (m *mcManager) Add(r manager.Runnable) error {
	if _, aware := r.(multicluster.Aware); !aware && m.host != nil && needsLeaderElection(r) {
		m.host.add(r)
		return nil
	}
	if err := m.Manager.Add(r); err != nil {
		return err
	}
	if aware, ok := r.(multicluster.Aware); ok {
		m.fleet.Subscribe(aware)
	}
	return nil
}

// Engage hands a cluster that its provider runs to the fleet engine. Inside
// the engine it is a member like any other: admitted, fenced under sharding,
// engaged with every Aware runnable (all or nothing), probed, handed off and
// torn down by the same code. See fleet.Engine.Engage.
func (m *mcManager) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	if err := validName(name, cl); err != nil {
		return err
	}
	return m.fleet.Engage(ctx, name, cl)
}

func validName(name multicluster.ClusterName, cl cluster.Cluster) error {
	if name == LocalCluster {
		return errors.New(`mcmanager: the cluster name "" is reserved for the host cluster`)
	}
	if cl == nil {
		return fmt.Errorf("mcmanager: cluster %q: nil cluster", name)
	}
	return nil
}

// SetMember publishes a desired member to the fleet engine (fleet.Publisher).
func (m *mcManager) SetMember(member fleet.Member) {
	if name := member.Name; name == LocalCluster {
		m.GetLogger().Error(errors.New(`the cluster name "" is reserved for the host cluster`), "Ignoring member")
		return
	}
	m.fleet.SetMember(member)
}

// Construction returns the cluster options and the settings hook
// (WithClusterOptions, WithClusterSettings) of the member name
// (fleet.Constructor).
func (m *mcManager) Construction(name multicluster.ClusterName) ([]cluster.Option, build.SettingsFunc) {
	return m.fleet.Construction(name)
}

// RemoveMember removes a member published with SetMember.
func (m *mcManager) RemoveMember(name multicluster.ClusterName) { m.fleet.RemoveMember(name) }

// Lookup returns the engaged cluster of name.
func (m *mcManager) Lookup(name multicluster.ClusterName) (cluster.Cluster, bool) {
	return m.fleet.Lookup(name)
}

// GetCluster returns the host cluster for "" and an engaged cluster otherwise.
// A disconnected cluster yields an error matching both
// multicluster.ErrClusterNotConnected and ErrClusterNotFound. A name the fleet
// does not know is asked of the provider, for providers that create clusters
// on demand.
func (m *mcManager) GetCluster(ctx context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	if name == LocalCluster {
		return m.Manager, nil
	}
	cl, err := m.fleet.Get(name)
	if err == nil {
		return cl, nil
	}
	if _, known := m.fleet.State(name); known || m.provider == nil {
		return nil, err
	}
	cl, perr := m.provider.Get(ctx, name)
	if perr != nil {
		if errors.Is(perr, multicluster.ErrClusterNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("cluster %q: asking the provider: %w", name, perr)
	}
	return cl, nil
}

// ClusterFromContext returns the cluster whose name ctx carries.
func (m *mcManager) ClusterFromContext(ctx context.Context) (cluster.Cluster, error) {
	name, ok := mccontext.ClusterFrom(ctx)
	if !ok {
		return nil, mccontext.ErrNoCluster
	}
	return m.GetCluster(ctx, name)
}

// GetManager returns a manager scoped to the named cluster.
func (m *mcManager) GetManager(ctx context.Context, name multicluster.ClusterName) (manager.Manager, error) {
	cl, err := m.GetCluster(ctx, name)
	if err != nil {
		return nil, err
	}
	if name == LocalCluster {
		return m.localManager(), nil
	}
	return &scopedManager{Manager: m.Manager, cl: cl}, nil
}

// SharedClusterProvider is implemented by providers whose clusters are views
// over one cluster's cache (the namespace provider). When that cluster is the
// host, the manager's field indexer leaves the host's index to the provider.
type SharedClusterProvider interface {
	multicluster.Provider
	// SharedCluster returns the cluster whose cache backs every cluster of the provider.
	SharedCluster() cluster.Cluster
}

// fleetIndexer registers an index on the host and, through the provider, on
// every provider cluster.
type fleetIndexer struct{ m *mcManager }

func (f *fleetIndexer) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	// A provider whose clusters are views over the host's own cache indexes
	// that cache itself; indexing it here too would register the index twice.
	if sp, ok := f.m.provider.(SharedClusterProvider); ok && sp.SharedCluster().GetCache() == f.m.Manager.GetCache() {
		if err := f.m.provider.IndexField(ctx, obj, field, extract); err != nil {
			return fmt.Errorf("indexing %T by %q on the host cluster and its views: %w", obj, field, err)
		}
		return nil
	}
	if err := f.m.Manager.GetFieldIndexer().IndexField(ctx, obj, field, extract); err != nil {
		return fmt.Errorf("indexing %T by %q on the host cluster: %w", obj, field, err)
	}
	if f.m.provider == nil {
		return nil
	}
	if err := f.m.provider.IndexField(ctx, obj, field, extract); err != nil {
		return fmt.Errorf("indexing %T by %q on provider clusters: %w", obj, field, err)
	}
	return nil
}

// providerRunnable runs the provider's discovery loop with the manager. It
// does not wait for leader election: every replica needs to know the fleet.
type providerRunnable struct {
	provider multicluster.ProviderRunnable
	aware    multicluster.Aware
}

func (p *providerRunnable) Start(ctx context.Context) error { return p.provider.Start(ctx, p.aware) }
func (p *providerRunnable) NeedLeaderElection() bool        { return false }
