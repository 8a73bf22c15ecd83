// Package fleetpeek lets the library's own tests look into a fleet engine
// and the clusters it builds where nothing public shows (the whole-system
// checker, internal/systemmodel, checks with it that nothing of a removed
// member remains). pkg/fleet and pkg/clusters set its functions when they
// are initialised; they are not part of any public API.
package fleetpeek

import "time"

// ProbeEntries returns the number of entries in the probe queue of engine
// (a *fleet.Engine), live or stale.
var ProbeEntries func(engine any) int

// ExpiryWarning returns when engine (a *fleet.Engine) warns of the expiry
// of the bearer token of the member name, if it will.
var ExpiryWarning func(engine any, name string) (at time.Time, ok bool)

// ConnGatesTo returns the number of connection gates the process holds
// (pkg/clusters' table, one per shared transport and host) whose host is
// host (host:port), those whose entry has not gone with its gate yet
// included.
var ConnGatesTo func(host string) int

// SetMinRefresh shortens how often a lazy REST mapper of pkg/fleet/build
// looks again for a kind it did not find; it returns the restore.
var SetMinRefresh func(d time.Duration) (restore func())

// MapperSharesConnections reports whether the REST mapper of a cluster
// built by pkg/fleet/build sends its requests through the cluster's own
// HTTP transport (its credentials, request bound and connection gate).
var MapperSharesConnections func(cl any) bool
