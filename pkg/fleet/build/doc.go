// Package build makes the clusters of a fleet: it sits below the fleet
// engine (pkg/fleet), which calls down into it, and calls nothing above.
//
// NewCluster builds a cluster with the defaults a fleet needs (a lazy REST
// mapper over the cluster's own connection, bounded requests, a connection
// gate per transport and host, event recorders started on first use, cache
// transforms that drop what controllers do not read); FromEndpoint builds a
// member from where it is (a rest.Config without credentials) and a Holder
// of who the controller is there, which every request reads, so that
// rotated credentials reach a running cluster without a rebuild
// (SplitCredentials, EndpointHash, TryCredentials); the settings hook
// (SettingsFunc) adjusts one cluster's client settings only.
// RESTConfigFromUntrustedKubeconfig reads a kubeconfig from a cluster or a
// file under rules that keep it from running commands or reading local
// files; ValidateClusterName is the rule for names.
//
// pkg/clusters re-exports the names the book teaches, so that a provider
// needs one import.
package build
