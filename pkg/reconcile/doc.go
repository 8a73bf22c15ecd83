// Package reconcile holds the multi-cluster request, the reconciler types built
// on controller-runtime's typed reconcilers, and the ClusterNotFound wrapper.
// Import it as mcreconcile.
package reconcile
