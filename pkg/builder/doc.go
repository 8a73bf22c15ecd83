// Package builder wires multi-cluster controllers the way controller-runtime's
// builder wires single-cluster ones. Import it as mcbuilder.
//
//	err := mcbuilder.ControllerManagedBy(mgr).
//		For(&corev1.ConfigMap{}).
//		Owns(&corev1.Secret{}).
//		Complete(reconciler)
//
// With a provider, watches cover the provider's clusters; without one, the host
// cluster. WithEngageWithLocalCluster and WithEngageWithProviderClusters choose
// per watch, and compose: both together watch the host and the fleet.
package builder
