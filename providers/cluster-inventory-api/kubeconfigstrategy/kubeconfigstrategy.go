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
	// AccessProvider gets them from KEP-5339 access providers.
	AccessProvider AccessProviderOption
}

// AccessProviderOption lists the access providers (credential plugins) the
// provider may run, in order of preference: a profile uses the first of them
// it lists. credentials.LoadAccessProviders reads them from the KEP's
// configuration file.
type AccessProviderOption struct {
	Providers []credentials.AccessProvider
}

// FromAccessProviders returns an Option that uses providers.
func FromAccessProviders(providers ...credentials.AccessProvider) Option {
	return Option{AccessProvider: AccessProviderOption{Providers: providers}}
}
