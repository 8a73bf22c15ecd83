// Package operating holds the code of the book's page on operating a fleet
// (docs/advanced/operating-a-fleet.md), compiled with the module so that
// every snippet builds against the current API. Nothing here is meant to be
// imported.
package operating

import (
	"context"
	"fmt"
	"net/http"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/status"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Repair pauses a cluster while it is repaired, and resumes it.
func Repair(ctx context.Context, mgr mcmanager.Manager, name multicluster.ClusterName, repair func(context.Context) error) error {
	// snippet:operate-pause
	pauser := mgr.(mcmanager.ClusterPauser)
	pauser.PauseCluster(name)        // its requests are held from now on
	defer pauser.ResumeCluster(name) // each held request is reconciled once
	return repair(ctx)
	// end-snippet
}

// NewManager returns a manager with damped flapping, a health check of its
// own and the status endpoint on the metrics listener.
func NewManager(cfg *rest.Config, provider multicluster.Provider) (mcmanager.Manager, error) {
	// snippet:operate-health
	// Healthy only when /readyz answers and the ingress controller is available.
	ingressAvailable := func(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
		d := &appsv1.Deployment{}
		key := client.ObjectKey{Namespace: "ingress-nginx", Name: "ingress-nginx-controller"}
		if err := cl.GetAPIReader().Get(ctx, key, d); err != nil {
			return err // a 401 or 403 here asks the provider for fresh credentials
		}
		if d.Status.AvailableReplicas == 0 {
			return fmt.Errorf("deployment %s has no available replica", key)
		}
		return nil
	}
	health := mcmanager.HealthOptions{
		FailureThreshold: 5,                // failed probes in a row before a cluster is disconnected
		SuccessThreshold: 3,                // healthy answers in a row before it is engaged again (default 2)
		Check:            ingressAvailable, // runs after /readyz, within the probe's Timeout
	}
	// end-snippet

	// snippet:operate-status
	return mcmanager.New(cfg, provider, mcmanager.Options{
		Metrics: metricsserver.Options{ // /metrics and /clusters
			BindAddress:    ":8443",
			SecureServing:  true,                                       // HTTPS
			FilterProvider: filters.WithAuthenticationAndAuthorization, // TokenReview, then SubjectAccessReview
		},
		HealthProbeBindAddress: ":8081", // /readyz and /healthz
	},
		mcmanager.WithHealthChecks(health),
		mcmanager.WithStatusEndpoint(status.DefaultPath), // the default: "/clusters"; "" serves none
	)
	// end-snippet
}

// ServeStatus serves the status endpoint on a listener of the program's own,
// for a manager whose metrics server is off.
func ServeStatus(ctx context.Context, mgr mcmanager.Manager) error {
	// snippet:operate-status-own-server
	mux := http.NewServeMux()
	mux.Handle("/clusters", status.NewHandler(mgr.(mcmanager.FleetOwner).Fleet(), status.Options{}))
	srv := &http.Server{Addr: "127.0.0.1:8082", Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	// end-snippet
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		return err
	}
	return nil
}
