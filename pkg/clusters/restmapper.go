package clusters

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
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
// A cluster built with this option releases its share when it is garbage
// collected; NewCluster releases it when the cluster stops.
func WithSharedRESTMapper(o *cluster.Options) {
	o.MapperProvider = func(c *rest.Config, hc *http.Client) (meta.RESTMapper, error) {
		return sharedMappers.mapperFor(c, hc)
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

type sharedMapperEntry struct {
	mapper *lazyMapper
	refs   int
}

// mapperFor returns the shared mapper of cfg's identity, made with the
// HTTP client of the first cluster that asks for it, behind a handle of the
// asking cluster's own: the share is released when the handle is garbage
// collected, or earlier with its release.
func (r *mapperRegistry) mapperFor(cfg *rest.Config, httpClient *http.Client) (*mapperShare, error) {
	id := identityOf(cfg)
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[id]
	if e == nil {
		m, err := newLazyMapper(cfg, httpClient)
		if err != nil {
			return nil, err
		}
		e = &sharedMapperEntry{mapper: m}
		r.entries[id] = e
	}
	e.refs++
	release := sync.OnceFunc(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if e.refs--; e.refs == 0 && r.entries[id] == e {
			delete(r.entries, id)
		}
	})
	h := &mapperShare{lazyMapper: e.mapper, release: release}
	runtime.AddCleanup(h, func(release func()) { release() }, release)
	return h, nil
}

// mapperShare is one cluster's handle on a shared mapper: the mapper's
// methods, and the cluster's reference on it, released once. The registry no
// longer hands the mapper to new clusters once no share is left; those still
// holding it keep using it.
type mapperShare struct {
	*lazyMapper
	release func()
}

var _ meta.RESTMapper = &mapperShare{}
