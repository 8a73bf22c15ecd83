package clusters

import (
	"encoding/base64"
	"time"

	"github.com/mcruntime/multicluster-runtime/internal/fleetpeek"

	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

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
func UnsignedJWT(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(claims)) + "." + enc([]byte("signature"))
}

// SetMinRefresh shortens how often the lazy mapper looks again, for tests.
func SetMinRefresh(d time.Duration) (restore func()) { return fleetpeek.SetMinRefresh(d) }

// MapperSharesConnections reports whether the REST mapper of a cluster
// built by NewCluster sends its requests through the cluster's own HTTP
// transport (its credentials, request bound and connection gate).
func MapperSharesConnections(cl cluster.Cluster) bool { return fleetpeek.MapperSharesConnections(cl) }
