package clusters_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcfleet "github.com/mcruntime/multicluster-runtime/pkg/fleet"
)

// A cluster running on a bearer token that says when it expires (a JWT's
// exp) has that time in multicluster_cluster_credentials_expiry_timestamp_seconds,
// for an alert before it runs out; its series follows the token (a new
// token, a new time; a token that says nothing, no series) and goes with the
// cluster.
func TestMembersExportTheExpiryOfTheirTokens(t *testing.T) {
	engine := mcfleet.New(mcfleet.Options{}) // not started: the warnings are the record's from publication on
	var m clusters.Members
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m.Start(ctx, engine, logr.Discard())
	token := func(exp time.Time) string {
		return clusters.UnsignedJWT(fmt.Sprintf(`{"iat":%d,"exp":%d}`, time.Now().Unix(), exp.Unix()))
	}
	cfg := func(token string) *rest.Config {
		return &rest.Config{Host: "https://member.example:6443", BearerToken: token}
	}
	const name = "expiry-series-member"
	first, second := time.Now().Add(time.Hour).Truncate(time.Second), time.Now().Add(2*time.Hour).Truncate(time.Second)

	m.Set(name, "1", cfg(token(first)), nil)
	if got, ok := expirySeries(t, name); !ok || got != float64(first.Unix()) {
		t.Errorf("after a token expiring at %d: series %v (%v)", first.Unix(), got, ok)
	}
	m.Set(name, "2", cfg(token(second)), nil)
	if got, ok := expirySeries(t, name); !ok || got != float64(second.Unix()) {
		t.Errorf("after a rotation to a token expiring at %d: series %v (%v)", second.Unix(), got, ok)
	}
	m.Set(name, "3", cfg("an-opaque-token-value"), nil)
	if got, ok := expirySeries(t, name); ok {
		t.Errorf("after a rotation to an opaque token: series %v, want none", got)
	}
	m.Set(name, "4", cfg(token(first)), nil)
	m.Remove(name)
	if got, ok := expirySeries(t, name); ok {
		t.Errorf("after the cluster was removed: series %v, want none", got)
	}
}

// expirySeries reads the cluster's series from controller-runtime's registry.
func expirySeries(t *testing.T, cluster string) (float64, bool) {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "multicluster_cluster_credentials_expiry_timestamp_seconds" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "cluster" && l.GetValue() == cluster {
					return s.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}
