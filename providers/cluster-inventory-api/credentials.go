package clusterinventoryapi

import (
	"k8s.io/client-go/rest"

	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/apis/v1alpha1"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/credentials"
)

// The access providers (KEP-5339) live in package credentials; these names
// keep the provider's API whole.
type (
	// AccessProvider is credentials.AccessProvider.
	AccessProvider = credentials.AccessProvider
	// AccessProvidersConfig is credentials.AccessProvidersConfig.
	AccessProvidersConfig = credentials.AccessProvidersConfig
	// ProfilePolicy is credentials.ProfilePolicy.
	ProfilePolicy = credentials.ProfilePolicy
	// CLIArgsPolicy is credentials.CLIArgsPolicy.
	CLIArgsPolicy = credentials.CLIArgsPolicy
	// EnvVarsPolicy is credentials.EnvVarsPolicy.
	EnvVarsPolicy = credentials.EnvVarsPolicy
)

// The policy values and reserved extensions of package credentials.
const (
	CLIArgsIgnore            = credentials.CLIArgsIgnore
	CLIArgsAppend            = credentials.CLIArgsAppend
	EnvVarsIgnore            = credentials.EnvVarsIgnore
	EnvVarsAppendIfNotExists = credentials.EnvVarsAppendIfNotExists
	EnvVarsReplace           = credentials.EnvVarsReplace
	ExtensionAdditionalArgs  = credentials.ExtensionAdditionalArgs
	ExtensionAdditionalEnvs  = credentials.ExtensionAdditionalEnvs
)

// The errors of package credentials, the same values.
var (
	ErrNoAccessProvider = credentials.ErrNoAccessProvider
	ErrServerRefused    = credentials.ErrServerRefused
)

// LoadAccessProviders is credentials.LoadAccessProviders.
func LoadAccessProviders(path string) ([]AccessProvider, error) {
	return credentials.LoadAccessProviders(path)
}

// SelectAccessProvider is credentials.SelectAccessProvider.
func SelectAccessProvider(profile *v1alpha1.ClusterProfile, configured []AccessProvider) (AccessProvider, v1alpha1.AccessProvider, error) {
	return credentials.SelectAccessProvider(profile, configured)
}

// RESTConfig is credentials.RESTConfig.
func RESTConfig(ap AccessProvider, entry v1alpha1.AccessProvider, policy ProfilePolicy) (*rest.Config, string, error) {
	return credentials.RESTConfig(ap, entry, policy)
}
