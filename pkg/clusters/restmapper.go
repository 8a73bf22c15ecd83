package clusters

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// WithSharedRESTMapper makes a cluster share its REST mapper with every other
// cluster of the process that reaches the same API server (same URL, TLS
// server name and CA) with the same credentials. Discovery documents do not
// depend on who asks, but a request for one cluster never runs with another
// cluster's credentials; and discovery data is most of what a cluster.Cluster
// holds: a fleet of clusters with one identity on one server pays for it once.
//
// If the shared mapper fails for any reason other than an unknown kind, a
// cluster falls back to a mapper of its own. A cluster built with this option
// releases its share when it is garbage collected; NewCluster releases it when
// the cluster stops.
func WithSharedRESTMapper(o *cluster.Options) {
	o.MapperProvider = func(c *rest.Config, hc *http.Client) (meta.RESTMapper, error) {
		m, err := sharedMappers.mapperFor(c, hc)
		if err != nil {
			return nil, err
		}
		return m, nil
	}
}

var sharedMappers = &mapperRegistry{entries: map[serverIdentity]*sharedMapperEntry{}}

// serverIdentity is what makes two configs reach the same API server as the
// same user.
type serverIdentity struct {
	host, apiPath, serverName string
	ca                        [sha256.Size]byte
	credentials               [sha256.Size]byte
}

func identityOf(cfg *rest.Config) serverIdentity {
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		ca = []byte("file:" + cfg.CAFile)
	}
	return serverIdentity{host: cfg.Host, apiPath: cfg.APIPath, serverName: cfg.ServerName, ca: sha256.Sum256(ca), credentials: credentialsOf(cfg)}
}

// credentialsOf fingerprints everything that decides who a config
// authenticates as. Configs with a custom transport or auth wrapper never
// share: their identity cannot be read.
func credentialsOf(cfg *rest.Config) [sha256.Size]byte {
	h := sha256.New()
	field := func(parts ...string) {
		for _, p := range parts {
			fmt.Fprintf(h, "%d:%s;", len(p), p)
		}
	}
	field(cfg.BearerToken, cfg.BearerTokenFile, cfg.Username, cfg.Password,
		string(cfg.CertData), cfg.CertFile, string(cfg.KeyData), cfg.KeyFile,
		cfg.Impersonate.UserName, cfg.Impersonate.UID, strings.Join(cfg.Impersonate.Groups, ","))
	if e := cfg.ExecProvider; e != nil {
		field("exec", e.Command, strings.Join(e.Args, " "), fmt.Sprint(e.Env), e.APIVersion)
	}
	if a := cfg.AuthProvider; a != nil {
		field("auth-provider", a.Name, fmt.Sprint(a.Config))
	}
	if cfg.Transport != nil || cfg.WrapTransport != nil || cfg.Dial != nil {
		fmt.Fprintf(h, "unshareable:%p", cfg)
	}
	var out [sha256.Size]byte
	copy(out[:], h.Sum(nil))
	return out
}

type mapperRegistry struct {
	mu      sync.Mutex
	entries map[serverIdentity]*sharedMapperEntry
}

type sharedMapperEntry struct {
	mapper meta.RESTMapper
	refs   int
}

func (r *mapperRegistry) mapperFor(cfg *rest.Config, httpClient *http.Client) (*sharedMapper, error) {
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

	ref := &sharedRef{id: id, entry: e, registry: r}
	h := &sharedMapper{shared: e.mapper, ref: ref, own: func() (meta.RESTMapper, error) { return NewLazyRESTMapper(cfg, httpClient) }}
	runtime.AddCleanup(h, (*sharedRef).release, ref)
	return h, nil
}

// sharedRef is one cluster's reference on a shared entry, released once.
type sharedRef struct {
	id       serverIdentity
	entry    *sharedMapperEntry
	registry *mapperRegistry
	once     sync.Once
}

func (ref *sharedRef) release() {
	ref.once.Do(func() {
		r := ref.registry
		r.mu.Lock()
		defer r.mu.Unlock()
		ref.entry.refs--
		if ref.entry.refs == 0 && r.entries[ref.id] == ref.entry {
			delete(r.entries, ref.id)
		}
	})
}

// sharedMapper is one cluster's handle on a shared mapper.
type sharedMapper struct {
	shared meta.RESTMapper
	ref    *sharedRef
	own    func() (meta.RESTMapper, error)

	mu       sync.Mutex
	fallback meta.RESTMapper // set once the shared mapper failed this cluster
}

var _ meta.RESTMapper = &sharedMapper{}

// release gives the cluster's share back; the mapper keeps working for it,
// but the registry no longer hands the entry to new clusters once no share
// is left.
func (m *sharedMapper) release() { m.ref.release() }

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
