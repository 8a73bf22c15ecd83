// Package clusters provides a Provider whose clusters are added and removed
// from code: for tests, demos, and programs that build their fleet
// themselves. It publishes the pre-built clusters it is given to the fleet
// engine through pkg/clusters.Members; the engine starts each one (unless the
// application runs it already), engages, probes and removes it.
package clusters
