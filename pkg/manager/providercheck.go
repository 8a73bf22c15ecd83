package manager

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// ClusterHealthChecker is implemented by providers that check their clusters'
// health in a way of their own (the kit's inventory.Options.HealthCheck, the
// file provider's Options.HealthCheck): the manager runs the check on every
// probe of the provider's clusters, after /readyz and after the manager's own
// check (HealthOptions.Check), with the same budget, timeout and handling of
// errors (a failure counts as a failed probe; a 401 or 403 re-reads the
// credentials). It adds to /readyz and never replaces it, whatever
// HealthOptions.SkipReadyz says.
type ClusterHealthChecker interface {
	// ClusterHealthCheck returns the provider's check, or nil for none. The
	// manager asks once, when it is made.
	ClusterHealthCheck() func(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error
}

// withProviderCheck returns h with provider's health check, if any, run
// after h's own Check.
func withProviderCheck(h fleet.HealthOptions, provider multicluster.Provider) fleet.HealthOptions {
	hc, ok := provider.(ClusterHealthChecker)
	if !ok {
		return h
	}
	own := hc.ClusterHealthCheck()
	if own == nil {
		return h
	}
	user := h.Check
	if user == nil {
		// SkipReadyz is ignored without a Check of the manager's: the
		// provider's adds to /readyz.
		h.SkipReadyz = false
		h.Check = own
		return h
	}
	h.Check = func(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
		if err := user(ctx, name, cl); err != nil {
			return err
		}
		return own(ctx, name, cl)
	}
	return h
}
