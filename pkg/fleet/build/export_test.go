package build

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

// MapperSharesConnections reports whether the REST mapper of a cluster
// built by NewCluster sends its requests through the cluster's own HTTP
// transport (its credentials, request bound and connection gate).
func MapperSharesConnections(cl cluster.Cluster) bool {
	lm := cl.GetRESTMapper().(*lazyMapper)
	hc := lm.discovery.(*discovery.DiscoveryClient).RESTClient().(*rest.RESTClient).Client
	return hc.Transport == cl.(*lightCluster).httpClient.Transport
}

// EventsStarted reports whether a cluster built by NewCluster made its event
// broadcasters.
func EventsStarted(cl any) bool {
	rs := cl.(*lightCluster).events
	rs.mu.RLock()
	defer rs.mu.RUnlock()
	return rs.started
}

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
