package clusters

import (
	"encoding/base64"
	"time"

	"github.com/mcruntime/multicluster-runtime/internal/fleetpeek"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"

	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// ExpiryWarningOf returns when engine warns of the expiry of name's token,
// if it will.
func ExpiryWarningOf(engine *fleet.Engine, name string) (time.Time, bool) {
	return fleetpeek.ExpiryWarning(engine, name)
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
