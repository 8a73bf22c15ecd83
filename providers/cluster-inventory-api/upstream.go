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
	strategy := opts.KubeconfigStrategyOption.AccessProvider.Providers
	if len(strategy) == 0 {
		return nil
	}
	if len(opts.AccessProviders) > 0 {
		return errors.New("cluster-inventory-api provider: both Options.AccessProviders and Options.KubeconfigStrategyOption.AccessProvider.Providers are set: set one")
	}
	opts.AccessProviders = strategy
	return nil
}
