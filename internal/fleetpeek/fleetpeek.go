// Package fleetpeek lets the library's own tests look into a fleet engine
// where nothing public shows (the whole-system checker,
// internal/systemmodel, checks with it that nothing of a removed member
// remains). pkg/fleet sets its functions when it is initialised; they are
// not part of any public API.
package fleetpeek

// ProbeEntries returns the number of entries in the probe queue of engine
// (a *fleet.Engine), live or stale.
var ProbeEntries func(engine any) int
