// Package clusters provides a Provider whose clusters are added and removed
// from code: for tests, demos, and programs that build their fleet
// themselves. It is the smallest provider built on pkg/clusters.
package clusters
