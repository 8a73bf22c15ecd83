// Package lifecycle holds the code of the book's pages on cluster lifecycle,
// health and readiness (docs/core-concepts/lifecycle-and-health.md,
// docs/advanced/metrics-and-readiness.md), compiled with the module so that
// every snippet builds against the current API. Nothing here is meant to be
// imported.
package lifecycle

import (
	"context"
	"errors"
	"time"

	"k8s.io/client-go/rest"

	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// NewManager returns a manager whose health probes are stricter than the
// defaults, and whose /readyz (with the check "clusters") is served on :8081.
func NewManager(cfg *rest.Config, provider multicluster.Provider) (mcmanager.Manager, error) {
	// snippet:health-options
	return mcmanager.New(cfg, provider,
		mcmanager.Options{HealthProbeBindAddress: ":8081"}, // serves /readyz, with the check "clusters"
		mcmanager.WithHealthChecks(mcmanager.HealthOptions{
			Interval:         5 * time.Second, // default 10s
			Timeout:          2 * time.Second, // default 5s
			FailureThreshold: 3,               // default 5
		}),
		mcmanager.WithClusterStartTimeout(time.Minute), // default 2 minutes
	)
	// end-snippet
}

// Reconcile tells a disconnected cluster from one that left. Both end the
// request without requeue when the error is returned (the builder's
// ClusterNotFoundWrapper); a reconciler that wants to say which it was can.
func Reconcile(mgr mcmanager.Manager) mcreconcile.Func {
	// snippet:not-connected
	return func(ctx context.Context, req mcreconcile.Request) (mcreconcile.Result, error) {
		cl, err := mgr.GetCluster(ctx, req.ClusterName)
		switch {
		case errors.Is(err, multicluster.ErrClusterNotConnected):
			// Failed its health probes: it is re-engaged when it answers again,
			// and its initial list brings this object back.
			return mcreconcile.Result{}, err // matches ErrClusterNotFound too: dropped, not retried
		case err != nil:
			return mcreconcile.Result{}, err // left the fleet (ErrClusterNotFound)
		}
		_ = cl // reconcile with cl.GetClient()
		return mcreconcile.Result{}, nil
	}
	// end-snippet
}
