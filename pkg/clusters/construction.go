package clusters

import (
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet/build"
)

// Building a cluster lives in pkg/fleet/build, below the fleet engine, which
// calls down into it; nothing there calls back up. These are the names the
// book teaches for it, kept here so that a provider needs one import.

const (
	// DefaultRequestTimeout: see build.DefaultRequestTimeout.
	DefaultRequestTimeout = build.DefaultRequestTimeout
	// LastAppliedAnnotation: see build.LastAppliedAnnotation.
	LastAppliedAnnotation = build.LastAppliedAnnotation
	// DefaultMaxKubeconfigSize: see build.DefaultMaxKubeconfigSize.
	DefaultMaxKubeconfigSize = build.DefaultMaxKubeconfigSize
	// MaxClusterNameLength: see build.MaxClusterNameLength.
	MaxClusterNameLength = build.MaxClusterNameLength
	// ExpiryWarningShare: see build.ExpiryWarningShare.
	ExpiryWarningShare = build.ExpiryWarningShare
)

var (
	// ErrKubeconfigRefused: see build.ErrKubeconfigRefused.
	ErrKubeconfigRefused = build.ErrKubeconfigRefused
	// ErrInvalidClusterName: see build.ErrInvalidClusterName.
	ErrInvalidClusterName = build.ErrInvalidClusterName
)

type (
	// Credentials: see build.Credentials.
	Credentials = build.Credentials
	// KubeconfigPolicy: see build.KubeconfigPolicy.
	KubeconfigPolicy = build.KubeconfigPolicy
	// SettingsFunc: see build.SettingsFunc.
	SettingsFunc = build.SettingsFunc
	// ExpiringCredentialsError: see build.ExpiringCredentialsError.
	ExpiringCredentialsError = build.ExpiringCredentialsError
	// RefusedCredentialsError: see build.RefusedCredentialsError.
	RefusedCredentialsError = build.RefusedCredentialsError
)

// MaxExpirySeries: see fleet.MaxExpirySeries.
const MaxExpirySeries = fleet.MaxExpirySeries

// NewCluster builds a cluster for cfg: see build.NewCluster.
func NewCluster(cfg *rest.Config, opts ...cluster.Option) (cluster.Cluster, error) {
	return build.NewCluster(cfg, opts...)
}

// NewLazyRESTMapper: see build.NewLazyRESTMapper.
func NewLazyRESTMapper(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	return build.NewLazyRESTMapper(cfg, httpClient)
}

// RESTConfigFromUntrustedKubeconfig: see build.RESTConfigFromUntrustedKubeconfig.
func RESTConfigFromUntrustedKubeconfig(data []byte, policy KubeconfigPolicy) (*rest.Config, error) {
	return build.RESTConfigFromUntrustedKubeconfig(data, policy)
}

// SplitCredentials: see build.SplitCredentials.
func SplitCredentials(cfg *rest.Config) (where *rest.Config, who Credentials) {
	return build.SplitCredentials(cfg)
}

// ValidateClusterName: see build.ValidateClusterName.
func ValidateClusterName(name string) error { return build.ValidateClusterName(name) }

// WithRequestTimeout: see build.WithRequestTimeout.
func WithRequestTimeout(d time.Duration) cluster.Option { return build.WithRequestTimeout(d) }

// WithClientRateLimits: see build.WithClientRateLimits.
func WithClientRateLimits(qps float32, burst int) cluster.Option {
	return build.WithClientRateLimits(qps, burst)
}

// WithResponseCompression: see build.WithResponseCompression.
func WithResponseCompression() cluster.Option { return build.WithResponseCompression() }

// WithCacheByObject: see build.WithCacheByObject.
func WithCacheByObject(obj client.Object, by cache.ByObject) cluster.Option {
	return build.WithCacheByObject(obj, by)
}

// WithCacheNamespaces: see build.WithCacheNamespaces.
func WithCacheNamespaces(namespaces ...string) cluster.Option {
	return build.WithCacheNamespaces(namespaces...)
}

// KeepManagedFields: see build.KeepManagedFields.
func KeepManagedFields() cluster.Option { return build.KeepManagedFields() }

// WithInternedStrings: see build.WithInternedStrings.
func WithInternedStrings() cluster.Option { return build.WithInternedStrings() }

// TransformStripFieldManagement: see build.TransformStripFieldManagement.
func TransformStripFieldManagement() toolscache.TransformFunc {
	return build.TransformStripFieldManagement()
}

// TransformInternStrings: see build.TransformInternStrings.
func TransformInternStrings() toolscache.TransformFunc { return build.TransformInternStrings() }
