// Package source provides multi-cluster event sources. Import it as mcsource.
//
// A Source yields, for each engaged cluster, a controller-runtime source whose
// lifetime is that cluster's engagement. Kind registers an event handler on
// the cluster's shared informer and removes it when the cluster disengages; it
// starts no watch of its own, and holds back what the handler enqueues until
// the informer's initial list is complete, with one goroutine per cluster
// that ends at sync or disengagement. Channel delivers generic events sent on
// a channel to the cluster they name, from one goroutine that reads the
// channel while a cluster is engaged. FanIn is the source of aggregating
// controllers: every member's changes, arrivals and departures become one
// request for the hub.
package source
