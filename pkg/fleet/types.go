package fleet

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet/build"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// State is where a cluster is in its lifecycle.
type State string

// The lifecycle: wanted → admitted → starting → engaged ⇄ disconnected → gone.
const (
	// StateWanted: a provider wants the cluster; this replica may not run it
	// (yet): sharding assigns it elsewhere, or the engine has not started.
	StateWanted State = "wanted"
	// StateAdmitted: this replica runs the cluster; an attempt to start it is
	// scheduled.
	StateAdmitted State = "admitted"
	// StateStarting: the cluster is being built, started and synced.
	StateStarting State = "starting"
	// StateEngaged: every controller and runnable works with the cluster.
	StateEngaged State = "engaged"
	// StateDisconnected: the cluster failed its health probes, or could not be
	// started; nothing works with it and it is retried with backoff.
	StateDisconnected State = "disconnected"
	// StateGone: the provider removed the cluster. Gone clusters are forgotten
	// at once; the state exists for logs and metrics.
	StateGone State = "gone"
)

var allStates = []State{StateWanted, StateAdmitted, StateStarting, StateEngaged, StateDisconnected}

// Member is a cluster a provider wants in the fleet, and how to get it. The
// engine builds, starts, syncs, engages, probes and tears it down; a new Hash
// for the same Name replaces the running cluster once the new one is engaged.
type Member struct {
	// Name of the cluster. Required.
	Name multicluster.ClusterName
	// Hash identifies the content Build builds from (a kubeconfig's hash, say).
	// Publishing the same name and Hash again changes nothing.
	Hash string
	// Config is where the cluster is and who the controller is there: the
	// engine builds the cluster from it (build.FromEndpoint) with its cluster
	// options (Options.ClusterOptions, then Options below) and its settings
	// hook. Exactly one of Config, Build and Cluster is set. The engine splits
	// it in two (build.SplitCredentials): a new Hash whose Config names
	// another endpoint (server, CA, TLS settings, proxy) builds a new
	// cluster, which replaces the running one once engaged; one that changes
	// the credentials only rotates them into the running cluster in place,
	// once the member accepts them (see connection.go): its caches and
	// watches keep running and nothing is listed or reconciled again. A
	// bearer token that says when it expires is warned of before it does
	// (Report hears a *build.ExpiringCredentialsError).
	Config *rest.Config
	// Source, with Config, is the object Config was read from: the settings
	// hook sees it at each build. Publishing the same Hash with another
	// Source changes the Source only.
	Source client.Object
	// Options, with Config, are applied to the clusters built from it after
	// the engine's Options.ClusterOptions.
	Options []cluster.Option
	// Build returns a new, unstarted cluster, for a provider that builds its
	// clusters itself. The engine starts it itself.
	Build func(ctx context.Context) (cluster.Cluster, error)
	// Cluster is a pre-built cluster, for providers handed one by the
	// application; a provider that can build its clusters publishes a Build
	// instead. The engine did not build it, so it never rebuilds it and
	// never stops it while the member is wanted: it starts it (unless the
	// application already did) the first time this replica runs the member,
	// keeps it running through outages, hand-offs to other replicas and
	// fences lost, engaging it again when it comes back, and stops it when
	// the member is removed or replaced. Its cache keeps running while
	// another replica owns it. Once stopped on its own, attempts fail saying
	// so until the provider publishes a new one.
	Cluster cluster.Cluster
	// Report, if set, hears of each failed attempt to start or engage the
	// cluster, of each silence of its watches (a *WatchSilentError, see
	// HealthOptions.WatchSilence), and of its engagement (with nil):
	// providers turn it into Events.
	Report func(err error)
	// Paused, if set, pauses the cluster (see Engine.SetPaused): providers
	// set it from their source (an annotation, say). Publishing the same
	// Hash with another Paused changes the pause only.
	Paused bool
	// Outcome, if set, hears once what became of this publication on this
	// replica: nil once the member is engaged with every subscriber, or at
	// once while this replica does not run it (the engine has not started,
	// or sharding assigns it elsewhere: it is engaged when it may, or where
	// it runs), and nil as well once the cluster is handed to another
	// replica before it is engaged here (a fence that lapses meanwhile
	// does not answer it: the cluster's next run here does); else the
	// error of its first failed attempt, or why it was replaced or removed
	// first. The engine never blocks on it: give it
	// room for one. Publishing the same Hash again hears of the member
	// already published.
	Outcome chan<- error
	// Refresh, if set, is called when the cluster rejects its credentials (401
	// or 403 from a probe): the provider re-reads its source and publishes the
	// member again if its content changed.
	Refresh func()
	// Indexes, if set, are the field indexes of the member's provider: the
	// engine applies every one of them to each cluster of the member before
	// its cache starts, and one registered later (Indexes.Add) reaches the
	// clusters that run or start meanwhile.
	Indexes *Indexes

	// adopted marks a member made by Engage (see door.go): its provider
	// runs the cluster, and owner is the provider's context it lives within.
	adopted bool
	owner   context.Context
	unown   func() bool
	// life ends when the engine lets go of the member (removed, replaced,
	// the engine stopped), and when it leaves this replica unless it is
	// lent (see lifeLocked): Build is handed it, and a pre-built cluster
	// runs within it. Guarded by the engine's lock.
	life    context.Context
	endLife context.CancelFunc
}

// Publisher takes the desired members of the fleet. The Multi-Cluster Manager
// implements it; providers reach it through the multicluster.Aware they are
// started with (pkg/clusters.Members does so), and wrappers that rename
// clusters (the multi provider) forward it.
type Publisher interface {
	// SetMember adds or updates a desired member.
	SetMember(m Member)
	// RemoveMember removes a member: it is disengaged and torn down.
	RemoveMember(name multicluster.ClusterName)
	// Lookup returns the engaged cluster of name.
	Lookup(name multicluster.ClusterName) (cluster.Cluster, bool)
}

// Admission decides which clusters this replica runs (sharding). The engine
// asks Owns before it starts a cluster, holds the fence from Acquire while the
// cluster runs, and stops the cluster before it releases the fence.
type Admission interface {
	// Owns reports whether this replica should run the cluster now.
	Owns(name string) bool
	// Changed is closed whenever the answers of Owns may have changed.
	Changed() <-chan struct{}
	// Acquire blocks until this replica holds the cluster's fence. The returned
	// context ends if the fence is lost; release gives it up.
	Acquire(ctx context.Context, name string) (fenced context.Context, release func(), err error)
}

// DrainBound is implemented by an Admission whose fences bound the drain: a
// fence lost to a renewal lapse may be taken by the next owner MaxDrain after
// this replica notices the loss, so reconciles in flight must have returned by
// then. The engine drains for at most the smaller of MaxDrain and
// Options.DrainTimeout.
type DrainBound interface {
	MaxDrain() time.Duration
}

// HealthOptions configure the health probes of engaged clusters. The zero
// value probes with the defaults below.
type HealthOptions struct {
	// Interval between probes of a healthy cluster. Default 10s.
	Interval time.Duration
	// Timeout of one probe. Default 5s.
	Timeout time.Duration
	// FailureThreshold is the number of consecutive failed probes after which a
	// cluster is disconnected. Default 5.
	FailureThreshold int
	// SuccessThreshold is the number of healthy answers in a row after which
	// a disconnected cluster is engaged again (each engagement relists every
	// watched type of the cluster, so a member that answers once between
	// failures must not be engaged every time it does). After a healthy
	// answer the next probe of a disconnected cluster comes after
	// MinBackoff, so that the wait this adds to a recovery is about
	// (SuccessThreshold-1) × MinBackoff. A cluster disconnected
	// FlapThreshold times within FlapWindow is flapping: each further
	// disconnection in the window doubles the answers it needs, up to 8
	// times SuccessThreshold; logged once when it starts. Default 2.
	SuccessThreshold int
	// Check, if set, is a health check of the cluster's own, run on every
	// probe after /readyz answered (or alone, with SkipReadyz): "this CRD is
	// served", "this Deployment is available". Its ctx ends at the probe's
	// Timeout; an error counts as a failed probe, and its text, redacted, is
	// the reason given when the cluster is disconnected. An error that is an
	// API server's 401 or 403 is a rejection of the credentials, as one from
	// /readyz is (Member.Refresh is called). It runs on the probe workers,
	// within the probe budget.
	Check func(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error
	// SkipReadyz leaves /readyz out: Check alone decides. Ignored without
	// Check.
	SkipReadyz bool
	// WatchSilence bounds how long every watch of an engaged cluster may
	// receive nothing (no event, no bookmark) while its API server answers
	// /readyz: beyond it, the cluster's probes fail with a
	// *WatchSilentError, and after FailureThreshold of them it is
	// disconnected and engaged again like any cluster that failed its
	// probes, which restarts its watches (a pre-built cluster, whose cache
	// its provider runs, keeps its watches: see Member.Cluster). The first
	// such probe of a silence is logged, reported to Member.Report (an
	// Event, with the providers of this repository) and counted in
	// multicluster_cluster_watch_silences_total; each sets
	// multicluster_cluster_watch_silent_seconds. client-go's informers ask
	// for bookmarks, which the API server's watch cache sends about once a
	// minute to every watch even when nothing changes; a watch the cache
	// does not serve (the cache disabled for its type, an aggregated API
	// server of another kind) may get none, so a cluster whose every watch
	// is of such types may look silent: raise the bound, or turn it off.
	// Only clusters that follow their watches are judged (those built by
	// pkg/clusters: every built-in provider's). Default DefaultWatchSilence
	// (3 minutes); negative turns it off.
	WatchSilence time.Duration
	// Disabled turns probing off: clusters are never disconnected for health.
	Disabled bool
	// MaxProbesPerSecond caps the probes of healthy clusters across the
	// fleet: with more clusters than Interval allows at this rate, each is
	// probed less often (every n/MaxProbesPerSecond seconds for n clusters
	// starting, engaged or disconnected here; see IntervalAt), so that
	// probing costs a bounded share of a core whatever the size of the
	// fleet, from its start-up on. A probe costs 0.1-0.16 ms of CPU, so
	// the default, 300, is 3-5 % of a core: 3,000 clusters are probed every
	// 10 s, 10,000 every 33 s. Outside the cap, a cluster whose probe
	// failed is probed again after Interval, and a disconnected one on its
	// backoff. Negative: no cap.
	MaxProbesPerSecond int
}

// Defaults of HealthOptions. Interval, Timeout and FailureThreshold are
// Cluster API's ClusterCache's.
const (
	DefaultProbeInterval         = 10 * time.Second
	DefaultProbeTimeout          = 5 * time.Second
	DefaultProbeFailureThreshold = 5
	DefaultMaxProbesPerSecond    = 300
	DefaultSuccessThreshold      = 2
	// FlapThreshold and FlapWindow define a flapping cluster (see
	// HealthOptions.SuccessThreshold).
	FlapThreshold = 3
	FlapWindow    = 10 * time.Minute
)

func (h HealthOptions) withDefaults() HealthOptions {
	setDefault(&h.Interval, DefaultProbeInterval)
	setDefault(&h.Timeout, DefaultProbeTimeout)
	setDefault(&h.FailureThreshold, DefaultProbeFailureThreshold)
	setDefault(&h.SuccessThreshold, DefaultSuccessThreshold)
	if h.WatchSilence == 0 {
		h.WatchSilence = DefaultWatchSilence
	}
	if h.MaxProbesPerSecond == 0 {
		h.MaxProbesPerSecond = DefaultMaxProbesPerSecond
	}
	return h
}

// IntervalAt returns the interval between probes of a healthy cluster when a
// replica runs n clusters: Interval, stretched so that they are probed at
// most MaxProbesPerSecond times a second in all (defaults applied).
func (h HealthOptions) IntervalAt(n int) time.Duration {
	return h.withDefaults().intervalAt(n)
}

// intervalAt is IntervalAt of options with their defaults applied.
func (h HealthOptions) intervalAt(n int) time.Duration {
	if h.MaxProbesPerSecond < 0 {
		return h.Interval
	}
	return max(h.Interval, time.Duration(n)*time.Second/time.Duration(h.MaxProbesPerSecond))
}

// Options configure an Engine. The zero value uses the defaults below.
type Options struct {
	// Logger logs every transition, with the cluster under the key "cluster".
	Logger logr.Logger
	// Health configures the probes.
	Health HealthOptions
	// CacheSyncTimeout bounds the start of a built cluster, until its cache
	// has synced. Default 2 minutes.
	CacheSyncTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between attempts to start a
	// cluster that failed, and between probes of a disconnected cluster.
	// Default 1s and 30s.
	MinBackoff, MaxBackoff time.Duration
	// MaxConcurrentProbes bounds the probes in flight. Default 32.
	MaxConcurrentProbes int
	// MaxHealthSeries caps the clusters with a series of their own in
	// multicluster_cluster_healthy. Default 1000.
	MaxHealthSeries int
	// Admission, if set, decides which clusters this replica runs.
	Admission Admission
	// DrainTimeout bounds how long a cluster's fence waits, once the cluster
	// was disengaged, for reconciles in flight against it (see Engine.Hold) to
	// return before it is released. A reconcile that outlives it is logged and
	// counted in multicluster_drain_overruns_total. Default 5s, and never more
	// than the Admission's MaxDrain (see DrainBound).
	DrainTimeout time.Duration
	// Listed, if set, is closed once the provider has published every member it
	// found at start-up (multicluster.ListingProvider): Ready fails until then,
	// for at most ListingTimeout after Start.
	Listed <-chan struct{}
	// ListingTimeout bounds how long Ready waits for Listed after Start; then
	// readiness no longer waits for it, and the overrun is logged. Default 1
	// minute.
	ListingTimeout time.Duration
	// OnRelease, if set, is called with the engine's lock held when a cluster
	// leaves this replica (removed, or handed to another replica): per-cluster
	// series are dropped. It must not call the engine.
	OnRelease func(name multicluster.ClusterName)
	// ClusterOptions, if set, returns the cluster options of the clusters
	// built for the member name (mcmanager.WithClusterOptions): the engine
	// applies them to the clusters it builds from a Member.Config, before
	// the member's own; a provider with a Build of its own asks for them
	// (see Constructor).
	ClusterOptions func(name multicluster.ClusterName) []cluster.Option
	// Settings, if set, is the client settings hook of every cluster built
	// for a member (mcmanager.WithClusterSettings), applied and handed over
	// as ClusterOptions are.
	Settings build.SettingsFunc
}

// Defaults of Options.
const (
	DefaultCacheSyncTimeout    = 2 * time.Minute
	DefaultMinBackoff          = time.Second
	DefaultMaxBackoff          = 30 * time.Second
	DefaultMaxConcurrentProbes = 32
	DefaultMaxHealthSeries     = 1000
	DefaultDrainTimeout        = 5 * time.Second
	DefaultListingTimeout      = time.Minute
)

func (o Options) withDefaults() Options {
	o.Health = o.Health.withDefaults()
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	setDefault(&o.CacheSyncTimeout, DefaultCacheSyncTimeout)
	setDefault(&o.MinBackoff, DefaultMinBackoff)
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(DefaultMaxBackoff, o.MinBackoff)
	}
	setDefault(&o.MaxConcurrentProbes, DefaultMaxConcurrentProbes)
	setDefault(&o.MaxHealthSeries, DefaultMaxHealthSeries)
	setDefault(&o.ListingTimeout, DefaultListingTimeout)
	setDefault(&o.DrainTimeout, DefaultDrainTimeout)
	if b, ok := o.Admission.(DrainBound); ok && b.MaxDrain() > 0 {
		o.DrainTimeout = min(o.DrainTimeout, b.MaxDrain())
	}
	return o
}

// setDefault sets an option that is not positive to its default.
func setDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}
