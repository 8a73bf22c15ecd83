// Package source provides multi-cluster event sources. Import it as mcsource.
//
// A Source yields, for each engaged cluster, a controller-runtime source whose
// lifetime is that cluster's engagement. Kind registers an event handler on
// the cluster's shared informer and removes it when the cluster disengages; it
// starts no goroutine of its own. FanIn is the source of aggregating
// controllers: every member's changes, arrivals and departures become one
// request for the hub.
package source
