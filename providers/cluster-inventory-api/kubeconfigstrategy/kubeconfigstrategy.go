// Package kubeconfigstrategy holds the upstream design's way of saying how
// the ClusterProfile provider gets each profile's credentials: through the
// access providers of KEP-5339, which run a credential plugin for the
// profile's cluster. Set clusterinventoryapi.Options.KubeconfigStrategyOption
// to an Option, or set Options.AccessProviders directly; they are the same.
package kubeconfigstrategy

import (
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/credentials"
)

// Option chooses how the provider gets a profile's credentials.
type Option struct {
	// AccessProvider, if set, gets them from KEP-5339 access providers
	// (upstream's shape: a pointer, nil for none).
	AccessProvider *AccessProviderOption
}

// AccessProviderOption holds the access providers (credential plugins) the
// provider may run, in order of preference: a profile uses the first of them
// it lists.
type AccessProviderOption struct {
	// Provider is the KEP-5339 configuration, as the file that
	// credentials.LoadAccessProviders reads holds it. Upstream's field is a
	// *access.Config of sigs.k8s.io/cluster-inventory-api, a module this
	// library does not depend on (it has its own types of the KEP); write
	// &credentials.AccessProvidersConfig{Providers: aps} instead.
	Provider *credentials.AccessProvidersConfig
}

// FromAccessProviders returns an Option that uses providers.
func FromAccessProviders(providers ...credentials.AccessProvider) Option {
	return Option{AccessProvider: &AccessProviderOption{Provider: &credentials.AccessProvidersConfig{Providers: providers}}}
}
