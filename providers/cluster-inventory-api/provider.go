package clusterinventoryapi

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/inventory"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/apis/v1alpha1"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/credentials"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/kubeconfigstrategy"
)

var (
	_ multicluster.Provider         = &Provider{}
	_ multicluster.ProviderRunnable = &Provider{}
	_ multicluster.ListingProvider  = &Provider{}
	_ reconcile.Reconciler          = &Provider{}
)

// ControllerName is the name of the controller SetupWithManager registers.
const ControllerName = "multicluster-cluster-inventory-api-provider"

// Event reasons recorded on ClusterProfiles.
const (
	ReasonInvalidProfile   = "InvalidClusterProfile"
	ReasonNoAccessProvider = "NoAccessProvider"
	ReasonDuplicateName    = inventory.ReasonDuplicateName
	ReasonEngageFailed     = inventory.ReasonEngageFailed
	ReasonEngaged          = inventory.ReasonEngaged
)

// Options configure a Provider.
type Options struct {
	// AccessProviders are the credential plugins the controller may run
	// (KEP-5339), in order of preference: a profile uses the first of them
	// it lists. Required; LoadAccessProviders reads them from the KEP's
	// configuration file.
	AccessProviders []AccessProvider
	// ClusterOptions are applied to every cluster the provider creates.
	ClusterOptions []cluster.Option
	// HealthCheck, if set, checks the health of each of the provider's
	// clusters on every probe, after /readyz and the manager's own check
	// (mcmanager.HealthOptions.Check): "this CRD is served", say. An error
	// counts as a failed probe. See mcmanager.ClusterHealthChecker.
	HealthCheck func(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error
	// IsReady decides whether a profile's cluster should be engaged.
	// Default ControlPlaneHealthy.
	IsReady func(ctx context.Context, profile *v1alpha1.ClusterProfile) bool
	// ClusterName names a profile's cluster. Default NamespacedName
	// ("<namespace>/<name>"); ClusterID uses the KEP-2149
	// cluster.clusterset.k8s.io property.
	ClusterName func(*v1alpha1.ClusterProfile) (multicluster.ClusterName, error)
	// Namespace limits the provider to the ClusterProfiles of one namespace.
	// Default: every namespace.
	Namespace string
	// ProfilePolicy says what a profile's cluster entry may ask for beyond
	// a server and its CA. The zero value refuses proxy-url,
	// insecure-skip-tls-verify, tls-server-name, local files and servers
	// on loopback, link-local or the hub's address: see ProfilePolicy.
	ProfilePolicy ProfilePolicy
	// KubeconfigStrategyOption is the upstream design's way of setting
	// AccessProviders: its AccessProvider.Providers are used when
	// AccessProviders is empty. Setting both fails New.
	KubeconfigStrategyOption kubeconfigstrategy.Option
	// NewCluster is the upstream design's constructor of each cluster. Here
	// clusters are built by the fleet engine (shared transports, probes, the
	// ClusterOptions), so New refuses options that set it: configure clusters
	// with ClusterOptions instead.
	NewCluster func(ctx context.Context, profile *v1alpha1.ClusterProfile, cfg *rest.Config, opts ...cluster.Option) (cluster.Cluster, error)
}

// ControlPlaneHealthy reports whether the profile's ControlPlaneHealthy
// condition is True. It is the default Options.IsReady.
func ControlPlaneHealthy(p *v1alpha1.ClusterProfile) bool {
	return meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionControlPlaneHealthy)
}

// NamespacedName names a cluster "<namespace>/<name>" after its profile. It
// is the default Options.ClusterName.
func NamespacedName(p *v1alpha1.ClusterProfile) (multicluster.ClusterName, error) {
	return p.Namespace + "/" + p.Name, nil
}

// ClusterID names a cluster after its KEP-2149 cluster.clusterset.k8s.io
// property, and fails for a profile without one or whose ID is not one
// KEP-2149 allows: an RFC 1123 DNS subdomain (lowercase letters, digits, '-'
// and '.', starting and ending with a letter or digit) of at most 128
// characters.
func ClusterID(p *v1alpha1.ClusterProfile) (multicluster.ClusterName, error) {
	id, ok := Property(p, v1alpha1.PropertyClusterID)
	if !ok || id == "" {
		return "", fmt.Errorf("ClusterProfile %s/%s has no %s property", p.Namespace, p.Name, v1alpha1.PropertyClusterID)
	}
	if err := validateClusterID(id); err != nil {
		return "", fmt.Errorf("ClusterProfile %s/%s: %s property: %w", p.Namespace, p.Name, v1alpha1.PropertyClusterID, err)
	}
	return id, nil
}

// maxClusterIDLength bounds a KEP-2149 cluster ID.
const maxClusterIDLength = 128

// validateClusterID holds an ID to KEP-2149's syntax. What the property
// holds is untrusted: without it, an ID that the API server stored with
// U+FFFD for bytes that were not UTF-8 (two IDs collapse into one), a path
// such as a/b/../c, or one with spaces would become a cluster name in
// requests, logs and metric labels. The error quotes the ID with escapes.
func validateClusterID(id string) error {
	if len(id) > maxClusterIDLength {
		return fmt.Errorf("%w: %d bytes, more than KEP-2149's %d, starting %.64q", pkgclusters.ErrInvalidClusterName, len(id), maxClusterIDLength, id)
	}
	if errs := validation.IsDNS1123Subdomain(id); len(errs) > 0 {
		return fmt.Errorf("%w: %q is not a KEP-2149 cluster ID (lowercase letters, digits, '-' and '.', starting and ending with a letter or digit)", pkgclusters.ErrInvalidClusterName, id)
	}
	return nil
}

// Property returns the value of a property of the profile's status.
func Property(p *v1alpha1.ClusterProfile, name string) (string, bool) {
	for _, prop := range p.Status.Properties {
		if prop.Name == name {
			return prop.Value, true
		}
	}
	return "", false
}

// Provider engages one cluster per ready ClusterProfile on the host cluster.
// Create it with New, pass it to mcmanager.New, and call SetupWithManager,
// which reads ClusterProfiles through a cache of the provider's own, with a
// scheme of its own: the manager's scheme need not know them.
type Provider struct {
	// Get, IndexField, ClusterNames, Start, Reconcile, Listed.
	*inventory.Kit[*v1alpha1.ClusterProfile]

	opts Options
}

// New returns a provider configured by opts. It fails if no access provider
// is configured, or one is incomplete.
func New(opts Options) (*Provider, error) {
	if err := fromStrategy(&opts); err != nil {
		return nil, err
	}
	if err := credentials.ValidateAccessProviders(opts.AccessProviders); err != nil {
		return nil, fmt.Errorf("cluster-inventory-api provider: %w", err)
	}
	opts.AccessProviders = append([]AccessProvider(nil), opts.AccessProviders...)
	if opts.IsReady == nil {
		opts.IsReady = func(_ context.Context, profile *v1alpha1.ClusterProfile) bool { return ControlPlaneHealthy(profile) }
	}
	if opts.ClusterName == nil {
		opts.ClusterName = NamespacedName
	}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("cluster-inventory-api provider: %w", err)
	}
	var namespaces []string
	if opts.Namespace != "" {
		namespaces = []string{opts.Namespace}
	}
	p := &Provider{opts: opts}
	p.Kit = inventory.New(inventory.Options[*v1alpha1.ClusterProfile]{
		Name:              ControllerName,
		Object:            &v1alpha1.ClusterProfile{},
		Desire:            p.desire,
		Scheme:            scheme,
		Namespaces:        namespaces,
		InvalidNameReason: ReasonInvalidProfile,
		ClusterOptions:    opts.ClusterOptions,
		HealthCheck:       opts.HealthCheck,
	})
	return p, nil
}

// SetupWithManager registers the provider's cache and controller on mgr's
// host cluster, whose address profiles may not name unless
// ProfilePolicy.HubServer says otherwise. mgr must run the provider: pass
// the provider to mcmanager.New (or to a provider that runs it, such as the
// multi provider). It takes the manager alone, as in the upstream design;
// SetupWithManagerContext is the same with a context.
func (p *Provider) SetupWithManager(mgr mcmanager.Manager) error {
	return p.SetupWithManagerContext(context.Background(), mgr)
}

// SetupWithManagerContext is SetupWithManager with a context, the shape of
// the kubeconfig provider's SetupWithManager.
func (p *Provider) SetupWithManagerContext(ctx context.Context, mgr mcmanager.Manager) error {
	if mgr == nil {
		return errors.New("cluster-inventory-api provider: nil manager")
	}
	if p.opts.ProfilePolicy.HubServer == "" {
		p.opts.ProfilePolicy.HubServer = mgr.GetLocalManager().GetConfig().Host
	}
	return p.Kit.SetupWithManager(ctx, mgr)
}

// desire reads the cluster a profile asks for. What only a change of the
// profile can fix is refused: reported once, not retried.
func (p *Provider) desire(ctx context.Context, _ client.Reader, profile *v1alpha1.ClusterProfile) (inventory.Desired, error) {
	key := client.ObjectKeyFromObject(profile)
	name, err := p.opts.ClusterName(profile)
	if err == nil {
		if err = pkgclusters.ValidateClusterName(name); err != nil {
			err = fmt.Errorf("ClusterProfile %s: %w", key, err)
		}
	}
	if err != nil {
		return inventory.Desired{Withdrawn: "its ClusterProfile names no valid cluster"}, inventory.Refused(ReasonInvalidProfile, err)
	}
	if !p.opts.IsReady(ctx, profile) {
		return inventory.Desired{Withdrawn: "its ClusterProfile is not ready"}, nil
	}
	ap, entry, err := credentials.SelectAccessProvider(profile, p.opts.AccessProviders)
	if err != nil {
		return inventory.Desired{}, inventory.Refused(ReasonNoAccessProvider, fmt.Errorf("cluster %q: ClusterProfile %s: %w", name, key, err))
	}
	cfg, hash, err := credentials.RESTConfig(ap, entry, p.opts.ProfilePolicy)
	if err != nil {
		return inventory.Desired{}, inventory.Refused(ReasonInvalidProfile, fmt.Errorf("cluster %q: ClusterProfile %s: %w", name, key, err))
	}
	return inventory.Desired{Name: name, Config: cfg, Hash: hash, LogValues: []any{"accessProvider", ap.Name}}, nil
}

// ClusterSet returns the KEP-2149 ClusterSet (the clusterset.k8s.io
// property) of an engaged cluster's profile, and whether it has one.
func (p *Provider) ClusterSet(name multicluster.ClusterName) (string, bool) {
	profile, ok := p.Source(context.Background(), name)
	if !ok {
		return "", false
	}
	set, _ := Property(profile, v1alpha1.PropertyClusterSet)
	return set, set != ""
}

// ProfileOf returns the namespace and name of the ClusterProfile a cluster
// comes from.
func (p *Provider) ProfileOf(name multicluster.ClusterName) (types.NamespacedName, bool) {
	return p.SourceOf(name)
}
