package build

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/mcruntime/multicluster-runtime/internal/watchlive"
)

// NewCluster builds a cluster as cluster.New does, from controller-runtime's
// cache and client and honouring the same options, with the defaults every
// provider-built cluster needs; opts may still override anything:
//
//   - A lazy REST mapper (NewLazyRESTMapper): discovery data is loaded one
//     group version at a time, when a type of it is first used, through
//     the cluster's own HTTP client: its credentials, rotated or not, its
//     pooled connection and its request bound.
//   - Client limits as controller-runtime gives the host: a config that sets
//     no QPS gets no client-side rate limit (client-go's default of 5
//     requests/s would make a busy member's queue grow without bound); the
//     API server's priority and fairness protects it. WithClientRateLimits
//     sets one.
//   - Every request except long-running ones is bounded by
//     DefaultRequestTimeout (WithRequestTimeout changes it), so that a member
//     that never answers cannot hold a reconcile for long.
//   - Clusters that share client-go's transport (one API server, one TLS
//     configuration) open their first connection to it once, not once per
//     request waiting for it (see connGate).
//   - No compressed responses (rest.Config.DisableCompression): the API
//     server compresses the streams informers watch, and each open watch
//     then holds a gzip reader of about 44 KB for as long as it is open,
//     more than a small member's objects. Events travel uncompressed
//     instead; WithResponseCompression asks for compression again.
//   - What a member of a large fleet seldom uses is built on first use: the
//     uncached API reader (GetAPIReader) and the event recorders with their
//     broadcasters. cluster.New builds both for every cluster, about 4 KB of
//     the 11 KB a cluster costs before its cache holds anything.
//   - The cache holds what controllers read: objects are stored without
//     metadata.managedFields and the LastAppliedAnnotation (see
//     TransformStripFieldManagement), before any transform of opts, which
//     still runs; KeepManagedFields keeps both. WithInternedStrings shares
//     their short strings with equal strings of objects cached before them
//     (off by default: it pays only where members cache the same
//     objects). Writes are unaffected: the
//     API server computes field ownership from each request and the object
//     it stores, never from a client's copy (an Update that omits
//     managedFields leaves them as they are; server-side apply sends only the
//     fields applied). An Update (PUT) of an object read from the cache does
//     drop its LastAppliedAnnotation on the server, as it would drop any
//     annotation missing from the request; Patch and server-side apply do
//     not.
func NewCluster(cfg *rest.Config, opts ...cluster.Option) (cluster.Cluster, error) {
	cl, err := newCluster(cfg, nil, opts...)
	if err != nil {
		return nil, err
	}
	return cl, nil
}

// newCluster is NewCluster; creds, if not nil, holds the cluster's
// credentials, which every request reads (see Members).
func newCluster(cfg *rest.Config, creds *Holder, opts ...cluster.Option) (*lightCluster, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS = -1
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	// No compressed responses unless WithResponseCompression asks for
	// them (see there); the config the cluster keeps says which it has.
	cfg.DisableCompression = true
	base, next, err := transportFor(cfg, creds)
	if err != nil {
		return nil, err
	}
	// A copy: for a plain config, HTTPClientFor returns http.DefaultClient.
	httpClient := *base
	live := new(watchlive.Tracker)
	bounded := &boundedTransport{next: next, timeout: DefaultRequestTimeout, gate: connGateFor(next, cfg.Host), live: live}
	httpClient.Transport = bounded

	o := cluster.Options{HTTPClient: &httpClient}
	flags := applyOptions(&o, opts)
	if first := memberTransform(flags); first != nil {
		o.Cache = transformFirst(o.Cache, first)
	}
	if flags.compression {
		if err := compress(cfg, creds, &o, bounded); err != nil {
			return nil, err
		}
	}
	cl, err := assemble(cfg, o)
	if err != nil {
		return nil, err
	}
	if creds != nil {
		cl.current = &currentConfig{creds: creds}
	}
	if o.HTTPClient != nil && o.HTTPClient.Transport == bounded {
		cl.live = live // an option that replaced the client replaced what follows the watches
	}
	return cl, nil
}

// assemble builds a cluster from options as cluster.New does, with the same
// defaults, except for the API reader and the event recorders (see
// NewCluster).
func assemble(cfg *rest.Config, o cluster.Options) (*lightCluster, error) {
	if o.HTTPClient == nil {
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return nil, fmt.Errorf("creating HTTP client: %w", err)
		}
		o.HTTPClient = hc
	}
	if o.Scheme == nil {
		o.Scheme = scheme.Scheme
	}
	if o.MapperProvider == nil {
		o.MapperProvider = NewLazyRESTMapper
	}
	if o.NewClient == nil {
		o.NewClient = client.New
	}
	if o.NewCache == nil {
		o.NewCache = cache.New
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logf.Log.WithName("cluster")
	}

	mapper, err := o.MapperProvider(cfg, o.HTTPClient)
	if err != nil {
		return nil, fmt.Errorf("creating REST mapper: %w", err)
	}
	cacheOpts := o.Cache
	if cacheOpts.Scheme == nil {
		cacheOpts.Scheme = o.Scheme
	}
	if cacheOpts.Mapper == nil {
		cacheOpts.Mapper = mapper
	}
	if cacheOpts.HTTPClient == nil {
		cacheOpts.HTTPClient = o.HTTPClient
	}
	ca, err := o.NewCache(cfg, cacheOpts)
	if err != nil {
		return nil, fmt.Errorf("creating cache: %w", err)
	}
	clientOpts := o.Client
	if clientOpts.Scheme == nil {
		clientOpts.Scheme = o.Scheme
	}
	if clientOpts.Mapper == nil {
		clientOpts.Mapper = mapper
	}
	if clientOpts.HTTPClient == nil {
		clientOpts.HTTPClient = o.HTTPClient
	}
	if clientOpts.Cache == nil {
		clientOpts.Cache = &client.CacheOptions{}
	}
	if clientOpts.Cache.Reader == nil {
		clientOpts.Cache.Reader = ca
	}
	cl, err := o.NewClient(cfg, clientOpts)
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	c := &lightCluster{
		config:     cfg,
		httpClient: o.HTTPClient,
		scheme:     o.Scheme,
		mapper:     mapper,
		cache:      ca,
		client:     cl,
	}
	c.apiReader = sync.OnceValues(func() (client.Reader, error) {
		return client.New(cfg, client.Options{HTTPClient: o.HTTPClient, Scheme: o.Scheme, Mapper: mapper})
	})
	//lint:ignore SA1019 cluster.New honours the deprecated option; so does NewCluster.
	c.events = &recorders{config: cfg, httpClient: o.HTTPClient, scheme: o.Scheme, log: o.Logger.WithName("events"), given: o.EventBroadcaster}
	return c, nil
}

// lightCluster is the cluster.Cluster NewCluster builds.
type lightCluster struct {
	config     *rest.Config
	httpClient *http.Client
	scheme     *runtime.Scheme
	mapper     meta.RESTMapper
	cache      cache.Cache
	client     client.Client
	apiReader  func() (client.Reader, error)
	events     *recorders
	// current, if set, follows the credentials rotated in place.
	current *currentConfig
	// live, if set, follows the watches of the cluster's HTTP client.
	live *watchlive.Tracker
}

var (
	_ cluster.Cluster  = &lightCluster{}
	_ watchlive.Source = &lightCluster{}
)

// WatchLiveness returns what follows the cluster's watches, nil if an option
// replaced its HTTP client: the engine's health probes read it (see
// fleet.HealthOptions.WatchSilence).
func (c *lightCluster) WatchLiveness() *watchlive.Tracker { return c.live }

func (c *lightCluster) GetHTTPClient() *http.Client          { return c.httpClient }
func (c *lightCluster) GetScheme() *runtime.Scheme           { return c.scheme }
func (c *lightCluster) GetRESTMapper() meta.RESTMapper       { return c.mapper }
func (c *lightCluster) GetCache() cache.Cache                { return c.cache }
func (c *lightCluster) GetFieldIndexer() client.FieldIndexer { return c.cache }
func (c *lightCluster) GetClient() client.Client             { return c.client }

// GetConfig returns the cluster's config, with the credentials its requests
// carry now.
func (c *lightCluster) GetConfig() *rest.Config {
	if c.current != nil {
		return c.current.get(c.config)
	}
	return c.config
}

// GetAPIReader returns a client that reads from the API server, not the
// cache, built on the first call.
func (c *lightCluster) GetAPIReader() client.Reader {
	r, err := c.apiReader()
	if err != nil {
		return failingReader{fmt.Errorf("creating the API reader: %w", err)}
	}
	return r
}

func (c *lightCluster) GetEventRecorderFor(name string) record.EventRecorder {
	return c.events.legacy(name)
}

func (c *lightCluster) GetEventRecorder(name string) recorder.EventRecorder {
	return c.events.recorder(name)
}

// Start runs the cache until ctx is done, then stops the event broadcasters
// and closes its connections: every one of its own certificate transports,
// if any, and the idle ones of the transports it shares (see
// closeConnections).
func (c *lightCluster) Start(ctx context.Context) error {
	defer closeConnections(c.httpClient.Transport)
	defer c.events.stop()
	return c.cache.Start(ctx)
}

// discard lets go of what a cluster that will never start holds (one that
// failed the check before its engagement, see probe): its connections, as
// Start does when it returns.
func (c *lightCluster) discard() {
	closeConnections(c.httpClient.Transport)
}

// failingReader answers every read with the error that kept the reader from
// being built.
type failingReader struct{ err error }

func (r failingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return r.err
}

func (r failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return r.err
}
