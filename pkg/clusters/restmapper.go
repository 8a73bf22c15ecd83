package clusters

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// NewCluster is cluster.New with the defaults every provider-built cluster
// needs; providers use it to build their clusters, and opts may still
// override anything:
//
//   - WithSharedRESTMapper: clusters that reach the same API server share its
//     discovery data, which is loaded lazily, one group version at a time
//     (NewLazyRESTMapper).
//   - Client limits as controller-runtime gives the host: a config that sets
//     no QPS gets no client-side rate limit (client-go's default of 5
//     requests/s would make a busy member's queue grow without bound); the
//     API server's priority and fairness protects it. WithClientRateLimits
//     sets one.
//   - Every request except long-running ones is bounded by
//     DefaultRequestTimeout (WithRequestTimeout changes it), so that a member
//     that never answers cannot hold a reconcile for long.
func NewCluster(cfg *rest.Config, opts ...cluster.Option) (cluster.Cluster, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS = -1
	}
	base, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating HTTP client: %w", err)
	}
	// A copy: for a plain config, HTTPClientFor returns http.DefaultClient.
	httpClient := *base
	next := httpClient.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	httpClient.Transport = &boundedTransport{next: next, timeout: DefaultRequestTimeout}
	defaults := []cluster.Option{
		WithSharedRESTMapper,
		func(o *cluster.Options) { o.HTTPClient = &httpClient },
	}
	return cluster.New(cfg, append(defaults, opts...)...)
}

// WithSharedRESTMapper makes a cluster share its REST mapper with every other
// cluster of the process that reaches the same API server (same URL, TLS
// server name and CA), whatever their credentials. Discovery documents do not
// depend on who asks, and they are most of what a cluster.Cluster holds: a
// fleet of virtual or per-tenant clusters on one server pays for them once.
//
// The shared mapper queries the server with the credentials of the cluster
// that created it. If that fails for any reason other than an unknown kind, a
// cluster falls back to a mapper of its own, built from its own credentials.
// The shared data is released when the last cluster using it is collected.
func WithSharedRESTMapper(o *cluster.Options) {
	o.MapperProvider = sharedMappers.mapperFor
}

var sharedMappers = &mapperRegistry{entries: map[serverIdentity]*sharedMapperEntry{}}

// serverIdentity is what makes two configs reach the same API server.
type serverIdentity struct {
	host, apiPath, serverName string
	ca                        [sha256.Size]byte
}

func identityOf(cfg *rest.Config) serverIdentity {
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		ca = []byte("file:" + cfg.CAFile)
	}
	return serverIdentity{host: cfg.Host, apiPath: cfg.APIPath, serverName: cfg.ServerName, ca: sha256.Sum256(ca)}
}

type mapperRegistry struct {
	mu      sync.Mutex
	entries map[serverIdentity]*sharedMapperEntry
}

type sharedMapperEntry struct {
	mapper meta.RESTMapper
	refs   int
}

func (r *mapperRegistry) mapperFor(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	id := identityOf(cfg)
	r.mu.Lock()
	e := r.entries[id]
	if e == nil {
		m, err := NewLazyRESTMapper(cfg, httpClient)
		if err != nil {
			r.mu.Unlock()
			return nil, err
		}
		e = &sharedMapperEntry{mapper: m}
		r.entries[id] = e
	}
	e.refs++
	r.mu.Unlock()

	h := &sharedMapper{shared: e.mapper, own: func() (meta.RESTMapper, error) { return NewLazyRESTMapper(cfg, httpClient) }}
	runtime.AddCleanup(h, r.release, sharedRef{id: id, entry: e})
	return h, nil
}

type sharedRef struct {
	id    serverIdentity
	entry *sharedMapperEntry
}

func (r *mapperRegistry) release(ref sharedRef) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ref.entry.refs--
	if ref.entry.refs == 0 && r.entries[ref.id] == ref.entry {
		delete(r.entries, ref.id)
	}
}

// sharedMapper is one cluster's handle on a shared mapper.
type sharedMapper struct {
	shared meta.RESTMapper
	own    func() (meta.RESTMapper, error)

	mu       sync.Mutex
	fallback meta.RESTMapper // set once the shared mapper failed this cluster
}

var _ meta.RESTMapper = &sharedMapper{}

// do runs fn on the shared mapper and, if that fails other than with "no
// match", on the cluster's own mapper from then on.
func do[T any](m *sharedMapper, fn func(meta.RESTMapper) (T, error)) (T, error) {
	m.mu.Lock()
	fallback := m.fallback
	m.mu.Unlock()
	if fallback != nil {
		return fn(fallback)
	}
	res, err := fn(m.shared)
	if err == nil || meta.IsNoMatchError(err) || timedOut(err) {
		// A server that does not answer in time would not answer the
		// cluster's own mapper either: fail now rather than wait twice.
		return res, err
	}
	own, ownErr := m.own()
	if ownErr != nil {
		return res, err
	}
	m.mu.Lock()
	if m.fallback == nil {
		m.fallback = own
	}
	fallback = m.fallback
	m.mu.Unlock()
	return fn(fallback)
}

func timedOut(err error) bool {
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout())
}

func (m *sharedMapper) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return do(m, func(r meta.RESTMapper) (schema.GroupVersionKind, error) { return r.KindFor(resource) })
}

func (m *sharedMapper) KindsFor(resource schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return do(m, func(r meta.RESTMapper) ([]schema.GroupVersionKind, error) { return r.KindsFor(resource) })
}

func (m *sharedMapper) ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return do(m, func(r meta.RESTMapper) (schema.GroupVersionResource, error) { return r.ResourceFor(input) })
}

func (m *sharedMapper) ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return do(m, func(r meta.RESTMapper) ([]schema.GroupVersionResource, error) { return r.ResourcesFor(input) })
}

func (m *sharedMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return do(m, func(r meta.RESTMapper) (*meta.RESTMapping, error) { return r.RESTMapping(gk, versions...) })
}

func (m *sharedMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return do(m, func(r meta.RESTMapper) ([]*meta.RESTMapping, error) { return r.RESTMappings(gk, versions...) })
}

func (m *sharedMapper) ResourceSingularizer(resource string) (string, error) {
	return do(m, func(r meta.RESTMapper) (string, error) { return r.ResourceSingularizer(resource) })
}
