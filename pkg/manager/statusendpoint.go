package manager

import (
	"fmt"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/sharding"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/status"
)

// WithStatusEndpoint serves the fleet's status endpoint (package status) at
// path on the metrics server's listener, instead of status.DefaultPath
// ("/clusters"); "" serves none. The endpoint is on by default.
//
// Why the metrics server: controller-runtime's manager serves /readyz and
// /healthz on a listener of its own whose handlers it keeps to itself (a
// readiness check can answer only "ok" or an error there), while its metrics
// server takes extra handlers and puts them behind the same filter as
// /metrics (Metrics.FilterProvider: authentication and authorization, when
// the program sets it). With the metrics server off (BindAddress "0"), the
// manager logs that the endpoint is not served; a program can mount
// status.NewHandler(mgr.(FleetOwner).Fleet(), status.Options{}) on a server
// of its own.
func WithStatusEndpoint(path string) Option {
	return func(o *options) { o.statusPath = &path }
}

// serveStatus adds the status endpoint to the metrics server.
func (m *mcManager) serveStatus(path *string) error {
	p := status.DefaultPath
	if path != nil {
		p = *path
	}
	if p == "" {
		return nil
	}
	if err := m.Manager.AddMetricsServerExtraHandler(p, status.NewHandler(m.fleet, status.Options{})); err != nil {
		return fmt.Errorf("mcmanager: serving the status endpoint at %q (choose another path with WithStatusEndpoint): %w", p, err)
	}
	return nil
}

// The status endpoint names each cluster's owner under sharding.
var _ fleet.OwnerReporter = &sharding.Coordinator{}
