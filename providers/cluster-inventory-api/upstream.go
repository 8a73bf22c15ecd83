package clusterinventoryapi

import (
	"errors"
)

// fromStrategy moves the upstream design's KubeconfigStrategyOption into
// AccessProviders, and refuses what has no meaning here.
func fromStrategy(opts *Options) error {
	if opts.NewCluster != nil {
		return errors.New("cluster-inventory-api provider: Options.NewCluster is not supported: clusters are built by the fleet engine; configure them with Options.ClusterOptions")
	}
	ap := opts.KubeconfigStrategyOption.AccessProvider
	if ap == nil || ap.Provider == nil || len(ap.Provider.Providers) == 0 {
		return nil
	}
	strategy := ap.Provider.Providers
	if len(opts.AccessProviders) > 0 {
		return errors.New("cluster-inventory-api provider: both Options.AccessProviders and Options.KubeconfigStrategyOption.AccessProvider.Provider are set: set one")
	}
	opts.AccessProviders = strategy
	return nil
}
