package clusters

import (
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// SetMinRefresh shortens how often the lazy mapper looks again, for tests.
func SetMinRefresh(d time.Duration) (restore func()) {
	old := minRefresh
	minRefresh = d
	return func() { minRefresh = old }
}

// SetDiscoveryTimeout shortens the lazy mapper's request timeout, for tests.
func SetDiscoveryTimeout(d time.Duration) (restore func()) {
	old := discoveryTimeout
	discoveryTimeout = d
	return func() { discoveryTimeout = old }
}

// LoadedGroupVersions returns what a lazy mapper has fetched, for tests.
func LoadedGroupVersions(m meta.RESTMapper) []schema.GroupVersion {
	lm := m.(*lazyMapper)
	lm.mu.Lock()
	defer lm.mu.Unlock()
	var out []schema.GroupVersion
	for gv := range lm.loaded {
		out = append(out, gv)
	}
	return out
}

// SharedMapperOf returns the shared mapper behind a cluster built by
// NewCluster, that of the cluster's current credentials (nil if it cannot
// be had).
func SharedMapperOf(m meta.RESTMapper) meta.RESTMapper {
	lm, err := m.(*mapperShare).state.mapper()
	if err != nil {
		return nil
	}
	return lm
}

// MapperSharesConnections reports whether the shared mapper of a cluster
// built by NewCluster sends its requests through the pooled transport the
// cluster's own requests go through (it has the same connection gate).
func MapperSharesConnections(cl cluster.Cluster) bool {
	lm := SharedMapperOf(cl.GetRESTMapper()).(*lazyMapper)
	hc := lm.discovery.(*discovery.DiscoveryClient).RESTClient().(*rest.RESTClient).Client
	theirs, ok := hc.Transport.(*boundedTransport)
	mine := cl.(*lightCluster).httpClient.Transport.(*boundedTransport)
	return ok && theirs.gate != nil && theirs.gate == mine.gate
}

// SharedMapperRefs returns how many clusters hold the shared mapper m.
func SharedMapperRefs(m meta.RESTMapper) int {
	sharedMappers.mu.Lock()
	defer sharedMappers.mu.Unlock()
	for _, e := range sharedMappers.entries {
		if meta.RESTMapper(e.mapper) == m {
			return e.refs
		}
	}
	return 0
}

// EventsStarted reports whether a cluster built by NewCluster made its event
// broadcasters.
func EventsStarted(cl any) bool {
	rs := cl.(*lightCluster).events
	rs.mu.RLock()
	defer rs.mu.RUnlock()
	return rs.started
}

// MemberKey returns what Members published to the engine as name's hash
// (the endpoint's, see Set), if name is wanted.
func MemberKey(m *Members, name string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.hashes[name]
	return w.published, ok
}

// ExpiryWarningOf returns when Members warns of the expiry of name's token,
// if it will.
func ExpiryWarningOf(m *Members, name string) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := m.hashes[name].expiry
	if w == nil {
		return time.Time{}, false
	}
	return w.at, true
}

// UnsignedJWT returns an unsigned JWT whose payload is claims (JSON).
func UnsignedJWT(claims string) string { return jwt(claims) }

// ConnGates counts the connection gates the process holds, those whose
// entry has not gone with its gate yet included.
func ConnGates() int {
	connGates.Lock()
	defer connGates.Unlock()
	return len(connGates.m)
}

// PooledTransportOf returns the *http.Transport under the HTTP client of a
// cluster built by NewCluster, nil if there is none.
func PooledTransportOf(cl cluster.Cluster) *http.Transport {
	rt := cl.GetHTTPClient().Transport
	for {
		w, ok := rt.(utilnet.RoundTripperWrapper)
		if !ok {
			break
		}
		rt = w.WrappedRoundTripper()
	}
	t, _ := rt.(*http.Transport)
	return t
}

// HasConnGate reports whether a cluster built by NewCluster holds the
// process's connection gate of its transport and host.
func HasConnGate(cl cluster.Cluster) bool {
	t := cl.(*lightCluster).httpClient.Transport.(*boundedTransport)
	return t.gate != nil && t.gate == connGateFor(t.next, cl.GetConfig().Host)
}
