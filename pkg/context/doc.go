// Package context carries a cluster name in a context.Context, so that code
// written against a single cluster can find "its" cluster through
// mcmanager.Manager.ClusterFromContext. Import it as mccontext.
package context
