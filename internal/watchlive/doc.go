// Package watchlive follows the watches of a cluster's HTTP client: when the
// last of them received anything (an event or a bookmark). The engine's
// health probes ask it whether a cluster's watches still deliver, beside
// whether its API server answers /readyz (see fleet.HealthOptions.WatchSilence).
//
// A Tracker is per cluster. Clusters built by pkg/clusters hand their
// client's watch responses to theirs (Tracker.Watch) and expose it through
// Source; a cluster without one is never judged on its watches.
package watchlive
