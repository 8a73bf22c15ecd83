package clusters

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// WithSharedRESTMapper makes a cluster share its REST mapper (a lazy one,
// see NewLazyRESTMapper) with every other cluster of the process that
// reaches the same API server (same URL, TLS server name and CA) with the
// same credentials. Discovery documents do not depend on who asks, but a
// request for one cluster never runs with another cluster's credentials; and
// discovery data is most of what a cluster.Cluster holds: a fleet of
// clusters with one identity on one server pays for it once.
//
// The shared mapper sends its requests through an HTTP client of its own,
// built from the config (client-go's transport cache gives it the
// connections of every client of the same TLS configuration), not through
// the cluster's HTTP client, which the option does not see: a cluster whose
// HTTP client does what its config does not say (a dialer of its own, a
// tunnel) cannot use it.
//
// A cluster built with this option releases its share when it is garbage
// collected; NewCluster releases it when the cluster stops.
func WithSharedRESTMapper(o *cluster.Options) {
	o.MapperProvider = func(c *rest.Config, _ *http.Client) (meta.RESTMapper, error) {
		return sharedMappers.shareFor(c, nil, 0)
	}
}

var sharedMappers = &mapperRegistry{entries: map[serverIdentity]*sharedMapperEntry{}}

// serverIdentity is what makes two configs reach the same API server as the
// same user, and the bound of the requests of the clusters that do
// (WithRequestTimeout): their discovery requests keep it too.
type serverIdentity struct {
	host, apiPath, serverName string
	ca                        [sha256.Size]byte
	credentials               [sha256.Size]byte
	timeout                   time.Duration
}

func identityOf(cfg *rest.Config, timeout time.Duration) serverIdentity {
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		ca = []byte("file:" + cfg.CAFile)
	}
	return serverIdentity{host: cfg.Host, apiPath: cfg.APIPath, serverName: cfg.ServerName, ca: sha256.Sum256(ca), credentials: credentialsOf(cfg), timeout: timeout}
}

// credentialsOf fingerprints everything that decides who a config
// authenticates as. Configs with a custom transport or auth wrapper never
// share: their identity cannot be read.
func credentialsOf(cfg *rest.Config) [sha256.Size]byte {
	parts := []string{cfg.BearerToken, cfg.BearerTokenFile, cfg.Username, cfg.Password,
		string(cfg.CertData), cfg.CertFile, string(cfg.KeyData), cfg.KeyFile,
		cfg.Impersonate.UserName, cfg.Impersonate.UID, strings.Join(cfg.Impersonate.Groups, ",")}
	if e := cfg.ExecProvider; e != nil {
		parts = append(parts, "exec", e.Command, strings.Join(e.Args, " "), fmt.Sprint(e.Env), e.APIVersion)
	}
	if a := cfg.AuthProvider; a != nil {
		parts = append(parts, "auth-provider", a.Name, fmt.Sprint(a.Config))
	}
	if cfg.Transport != nil || cfg.WrapTransport != nil || cfg.Dial != nil {
		parts = append(parts, fmt.Sprintf("unshareable:%p", cfg))
	}
	return hashParts(parts...)
}

// hashParts hashes parts, each prefixed with its length so that no two lists
// of parts hash alike.
func hashParts(parts ...string) [sha256.Size]byte {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s;", len(p), p)
	}
	var out [sha256.Size]byte
	copy(out[:], h.Sum(nil))
	return out
}

type mapperRegistry struct {
	mu      sync.Mutex
	entries map[serverIdentity]*sharedMapperEntry
}

// sharedMapperEntry is the mapper of one identity, and its HTTP client's:
// its requests carry that identity's credentials, whoever asks.
type sharedMapperEntry struct {
	id     serverIdentity
	mapper *lazyMapper
	refs   int
	// transport's idle connections are closed once no cluster holds the
	// entry: those of a transport shared with clusters (client-go caches
	// them) are not idle while the clusters watch; those of a transport of
	// its own (a config client-go cannot cache, a client certificate
	// rotated in) would otherwise stay open until they time out.
	transport http.RoundTripper
}

// acquire returns the entry of cfg's identity and timeout, made on first
// use with a client built from cfg, and takes a reference on it.
func (r *mapperRegistry) acquire(cfg *rest.Config, timeout time.Duration) (*sharedMapperEntry, error) {
	id := identityOf(cfg, timeout)
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[id]; e != nil {
		e.refs++
		return e, nil
	}
	hc, transport, err := discoveryClientFor(cfg, timeout)
	if err != nil {
		return nil, err
	}
	m, err := newLazyMapper(cfg, hc)
	if err != nil {
		return nil, err
	}
	e := &sharedMapperEntry{id: id, mapper: m, refs: 1, transport: transport}
	r.entries[id] = e
	return e, nil
}

// release drops a reference on e, and e once no cluster holds it: the next
// cluster of its identity gets a new one.
func (r *mapperRegistry) release(e *sharedMapperEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.refs--; e.refs > 0 || r.entries[e.id] != e {
		return
	}
	delete(r.entries, e.id)
	utilnet.CloseIdleConnectionsFor(e.transport)
}

// discoveryClientFor returns the HTTP client of a shared mapper: cfg's, with
// exactly its credentials, through the transport client-go shares between
// clients of cfg's TLS configuration (the clusters', whose connection gate
// it passes too), its requests bounded by timeout (none: the lazy mapper's
// discoveryTimeout); and that transport.
func discoveryClientFor(cfg *rest.Config, timeout time.Duration) (*http.Client, http.RoundTripper, error) {
	base, next, err := transportFor(cfg, nil)
	if err != nil {
		return nil, nil, err
	}
	hc := *base // for a plain config, base is http.DefaultClient
	hc.Transport = &boundedTransport{next: next, timeout: timeout, gate: connGateFor(next, cfg.Host)}
	return &hc, next, nil
}

// shareFor returns a cluster's handle on the shared mapper of cfg's
// identity, whose requests are bounded by timeout. creds, if not nil, are
// the credentials the cluster's requests read (see Members): when they
// rotate in place, the handle moves to the mapper of the new identity, so
// that the cluster's lookups carry its current credentials and keep working
// once the old ones are revoked. The share is released when the handle is
// garbage collected, or earlier with its release.
func (r *mapperRegistry) shareFor(cfg *rest.Config, creds *credentials, timeout time.Duration) (*mapperShare, error) {
	// No generation yet: the first lookup reads which one cfg's
	// credentials are (a rotation may have come between the build's
	// reading of them and now).
	s := &shareState{reg: r, built: cfg, creds: creds, timeout: timeout}
	e, err := r.acquire(cfg, timeout)
	if err != nil {
		return nil, err
	}
	s.entry = e
	h := &mapperShare{state: s}
	runtime.AddCleanup(h, (*shareState).release, s)
	return h, nil
}

// shareState is what a handle holds, apart from the handle itself so that the
// garbage collector can release it.
type shareState struct {
	reg     *mapperRegistry
	built   *rest.Config // the cluster's config, with the credentials it was built with
	creds   *credentials // nil: they never change
	timeout time.Duration

	mu       sync.Mutex
	entry    *sharedMapperEntry
	gen      uint64 // creds's generation the entry is of; 0 before the first lookup
	released bool
}

// mapper returns the mapper of the cluster's current credentials, moving
// the share first if they rotated.
func (s *shareState) mapper() (*lazyMapper, error) {
	if s.creds == nil {
		return s.entry.mapper, nil // never moves: set before the handle was handed out
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return s.entry.mapper, nil
	}
	cur := s.creds.cur.Load()
	if cur.gen == s.gen {
		return s.entry.mapper, nil
	}
	cfg := configWith(s.built, cur)
	if identityOf(cfg, s.timeout) != s.entry.id {
		e, err := s.reg.acquire(cfg, s.timeout)
		if err != nil {
			// Not the old mapper: it would send the old credentials.
			return nil, fmt.Errorf("sharing discovery for the rotated credentials: %w", err)
		}
		s.reg.release(s.entry)
		s.entry = e
	}
	s.gen = cur.gen
	return s.entry.mapper, nil
}

// release gives the share back, once.
func (s *shareState) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.released {
		s.released = true
		s.reg.release(s.entry)
	}
}

// mapperShare is one cluster's handle on a shared mapper: the mapper's
// methods, answered by the mapper of the cluster's current credentials, and
// the cluster's reference on it, released once. The registry no longer
// hands a mapper to new clusters once no share is left; those still holding
// it keep using it.
type mapperShare struct{ state *shareState }

var _ meta.RESTMapper = &mapperShare{}

// release gives the cluster's share back.
func (h *mapperShare) release() { h.state.release() }

// follow moves the share to the mapper of the cluster's current
// credentials now, rather than at its next lookup, so that the mapper of
// the old ones is released as soon as no other cluster holds it.
func (h *mapperShare) follow() error {
	_, err := h.state.mapper()
	return err
}

// followCredentials moves the share of cl's REST mapper, if it is a
// cluster built by NewCluster, to the mapper of its rotated credentials.
func followCredentials(cl cluster.Cluster) error {
	if lc, ok := cl.(*lightCluster); ok {
		if h, ok := lc.mapper.(*mapperShare); ok {
			return h.follow()
		}
	}
	return nil
}

// on calls f with the mapper of the cluster's current credentials.
func on[A, T any](h *mapperShare, f func(*lazyMapper, A) (T, error), a A) (T, error) {
	m, err := h.state.mapper()
	if err != nil {
		var zero T
		return zero, err
	}
	return f(m, a)
}

// RESTMapping returns the mapping of a kind.
func (h *mapperShare) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return on(h, func(m *lazyMapper, gk schema.GroupKind) (*meta.RESTMapping, error) {
		return m.RESTMapping(gk, versions...)
	}, gk)
}

// RESTMappings returns the mappings of a kind.
func (h *mapperShare) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return on(h, func(m *lazyMapper, gk schema.GroupKind) ([]*meta.RESTMapping, error) {
		return m.RESTMappings(gk, versions...)
	}, gk)
}

// KindFor returns the kind of a resource.
func (h *mapperShare) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return on(h, (*lazyMapper).KindFor, resource)
}

// KindsFor returns the kinds of a resource.
func (h *mapperShare) KindsFor(resource schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return on(h, (*lazyMapper).KindsFor, resource)
}

// ResourceFor completes a partial resource.
func (h *mapperShare) ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return on(h, (*lazyMapper).ResourceFor, input)
}

// ResourcesFor completes a partial resource.
func (h *mapperShare) ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return on(h, (*lazyMapper).ResourcesFor, input)
}

// ResourceSingularizer answers from the group versions loaded so far.
func (h *mapperShare) ResourceSingularizer(resource string) (string, error) {
	return on(h, (*lazyMapper).ResourceSingularizer, resource)
}
