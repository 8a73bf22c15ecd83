package fleet

import (
	"github.com/mcruntime/multicluster-runtime/internal/metrics"
)

// MaxExpirySeries caps the clusters with a series of their own in
// multicluster_cluster_credentials_expiry_timestamp_seconds: beyond it, a
// new cluster's token is watched and warned of as any other, without a
// series.
const MaxExpirySeries = 10000

var (
	credentialsExpiry = metrics.NewGaugeVec("multicluster_cluster_credentials_expiry_timestamp_seconds",
		"Unix time at which the cluster's bearer token expires (its JWT exp), while the cluster runs on a token that says so; no series for other credentials (the first 10,000 clusters).",
		"cluster")
	expirySeries = &metrics.SeriesCap{Max: MaxExpirySeries}
)

// exportExpiry sets the expiry series of w's cluster, if there is room.
func exportExpiry(w *expiryWatch) {
	if expirySeries.Admit(w.name) {
		credentialsExpiry.WithLabelValues(w.name).Set(float64(w.exp.Unix()))
	}
}

// unexportExpiry removes the expiry series of name.
func unexportExpiry(name string) {
	if expirySeries.Release(name) {
		credentialsExpiry.DeleteLabelValues(name)
	}
}
