package capi

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	//lint:ignore SA1019 v1beta1 is deprecated upstream, and supported here for installations that serve nothing newer.
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/internal/redact"
	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/inventory"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

var (
	_ multicluster.Provider         = &Provider{}
	_ multicluster.ProviderRunnable = &Provider{}
	_ multicluster.ListingProvider  = &Provider{}
)

const (
	// ControllerName is the name of the controller SetupWithManager registers.
	ControllerName = "multicluster-capi-provider"
	// KubeconfigSecretSuffix follows the Cluster's name in the name of its
	// kubeconfig Secret, as Cluster API writes it.
	KubeconfigSecretSuffix = "-kubeconfig"
	// KubeconfigSecretKey is the data key of the kubeconfig in that Secret.
	KubeconfigSecretKey = "value"
	// ClusterNameLabel is the label Cluster API puts on a Cluster's Secrets.
	// Only Secrets carrying it are read.
	ClusterNameLabel = "cluster.x-k8s.io/cluster-name"
)

// Event reasons recorded on Clusters.
const (
	ReasonKubeconfigMissing = "KubeconfigMissing"
	ReasonInvalidKubeconfig = "InvalidKubeconfig"
	ReasonEngageFailed      = inventory.ReasonEngageFailed
	ReasonEngaged           = inventory.ReasonEngaged
)

// Options configure a Provider. The zero value watches v1beta2 Clusters in
// every namespace and engages them once their control plane is initialised.
type Options struct {
	// ClusterOptions are applied to every cluster the provider creates.
	ClusterOptions []cluster.Option
	// HealthCheck, if set, checks the health of each of the provider's
	// clusters on every probe, after /readyz and the manager's own check
	// (mcmanager.HealthOptions.Check): "this CRD is served", say. An error
	// counts as a failed probe. See mcmanager.ClusterHealthChecker.
	HealthCheck func(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error
	// ObjectToWatch is the Cluster type read from the host:
	// &v1beta2.Cluster{} (the default) or &v1beta1.Cluster{} for older
	// installations. Other types are refused by SetupWithManager.
	ObjectToWatch client.Object
	// IsReady reports whether a Cluster may be engaged; it receives an object
	// of ObjectToWatch's type and the context of the reconcile that reads it
	// (upstream's shape). Defaults to DefaultIsReady.
	IsReady func(ctx context.Context, obj client.Object) bool
	// Predicates select the Clusters considered: a Cluster is engaged only
	// while every predicate accepts it as a Generic event (so
	// predicate.NewPredicateFuncs filters apply), and is disengaged when one
	// stops accepting it. Default: every Cluster.
	Predicates []predicate.Predicate
	// Namespaces limits the Clusters and Secrets read to these namespaces.
	// Default: all namespaces.
	Namespaces []string
	// AllowedExecCommands lists the exec credential plugin commands a
	// kubeconfig Secret may name. Default: none; kubeconfigs that need one are
	// refused (see clusters.KubeconfigPolicy).
	AllowedExecCommands []string
	// GetSecret, if set, returns the kubeconfig Secret of a Cluster (an
	// object of ObjectToWatch's type) instead of the Secret
	// "<name>-kubeconfig" of its namespace. Its value is read under
	// KubeconfigSecretKey. A changed Secret is seen at once only if it
	// carries ClusterNameLabel (the provider watches those); others are read
	// again when the Cluster changes. An error is reported on the Cluster and
	// retried; a nil Secret withdraws the cluster as a missing one does.
	GetSecret func(ctx context.Context, cluster client.Object) (*corev1.Secret, error)
	// NewCluster is the upstream design's constructor of each cluster. Here
	// clusters are built by the fleet engine (shared transports, probes, the
	// ClusterOptions), so SetupWithManager refuses a provider that sets it:
	// configure clusters with ClusterOptions instead.
	NewCluster func(ctx context.Context, clusterName multicluster.ClusterName, cfg *rest.Config, opts ...cluster.Option) (cluster.Cluster, error)
}

// Provider engages one cluster per ready Cluster API Cluster. Create it with
// New, pass it to mcmanager.New, and call SetupWithManager.
type Provider struct {
	*inventory.Kit[client.Object] // Get, IndexField, ClusterNames, Start, Listed, Reconcile

	opts Options
}

// New returns a provider for the Clusters described by opts.
func New(opts Options) *Provider {
	if opts.ObjectToWatch == nil {
		opts.ObjectToWatch = &clusterv1.Cluster{}
	}
	if opts.IsReady == nil {
		opts.IsReady = func(_ context.Context, obj client.Object) bool { return DefaultIsReady(obj) }
	}
	p := &Provider{opts: opts}
	scheme := runtime.NewScheme() // the provider's own: the manager's need not know Cluster API
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, clusterv1.AddToScheme, clusterv1beta1.AddToScheme} {
		utilruntime.Must(add(scheme))
	}
	labelled, _ := labels.NewRequirement(ClusterNameLabel, selection.Exists, nil) // a valid key: no error
	p.Kit = inventory.New(inventory.Options[client.Object]{
		Name:       ControllerName,
		Object:     opts.ObjectToWatch,
		Desire:     p.desire,
		Scheme:     scheme,
		Namespaces: opts.Namespaces,
		Related: []inventory.Related{{
			Object:   &corev1.Secret{},
			Selector: labels.NewSelector().Add(*labelled),
			Owners:   secretToCluster,
		}},
		// A missing or bad Secret is retried, slowly: each failure records an Event.
		RateLimiter:    workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, 2*time.Minute),
		ClusterOptions: opts.ClusterOptions,
		HealthCheck:    opts.HealthCheck,
	})
	return p
}

// SetupWithManager registers the provider's cache and controller on mgr's
// host cluster (see inventory.Kit.SetupWithManager). They read Clusters and
// their Secrets, limited to Options.Namespaces and to Secrets labelled
// ClusterNameLabel, with a scheme of the provider's own: the manager's scheme
// need not know Cluster API. It takes the manager alone, as in the upstream
// design; SetupWithManagerContext is the same with a context, the shape of
// the other controller-driven providers.
func (p *Provider) SetupWithManager(mgr mcmanager.Manager) error {
	return p.SetupWithManagerContext(context.Background(), mgr)
}

// SetupWithManagerContext is SetupWithManager with a context, as the
// kubeconfig and cluster-inventory-api providers' SetupWithManager take one.
func (p *Provider) SetupWithManagerContext(ctx context.Context, mgr mcmanager.Manager) error {
	switch p.opts.ObjectToWatch.(type) {
	case *clusterv1.Cluster, *clusterv1beta1.Cluster:
	default:
		return fmt.Errorf("capi provider: ObjectToWatch %T is not supported: use a v1beta2 or v1beta1 Cluster of sigs.k8s.io/cluster-api/api/core", p.opts.ObjectToWatch)
	}
	if p.opts.NewCluster != nil {
		return errNewCluster
	}
	return p.Kit.SetupWithManager(ctx, mgr)
}

// secretToCluster maps a kubeconfig Secret to its Cluster.
func secretToCluster(s client.Object) []client.ObjectKey {
	name, ok := strings.CutSuffix(s.GetName(), KubeconfigSecretSuffix)
	if !ok || name == "" {
		return nil
	}
	return []client.ObjectKey{{Namespace: s.GetNamespace(), Name: name}}
}

// desire reads the cluster a Cluster asks for: named "<namespace>/<name>",
// reached with the kubeconfig of its Secret, once it is selected and ready.
// A missing or bad Secret is reported and retried; a missing one also
// withdraws the cluster, whose credentials are gone.
func (p *Provider) desire(ctx context.Context, r client.Reader, obj client.Object) (inventory.Desired, error) {
	name := obj.GetNamespace() + "/" + obj.GetName()
	for _, pred := range p.opts.Predicates {
		if !pred.Generic(event.GenericEvent{Object: obj}) {
			return inventory.Desired{Withdrawn: "the Predicates no longer select its Cluster"}, nil
		}
	}
	if !p.opts.IsReady(ctx, obj) {
		return inventory.Desired{Withdrawn: "its Cluster is not ready"}, nil
	}
	key := client.ObjectKey{Namespace: obj.GetNamespace(), Name: obj.GetName() + KubeconfigSecretSuffix}
	secret, err := p.secret(ctx, r, key, obj)
	if apierrors.IsNotFound(err) { // the credentials were withdrawn: stop using the old ones
		return inventory.Desired{Withdrawn: "its kubeconfig Secret is gone"}, inventory.Failed(ReasonKubeconfigMissing,
			fmt.Errorf("cluster %q: kubeconfig Secret %s not found (it must carry the label %s)", name, key, ClusterNameLabel))
	}
	if err != nil {
		return inventory.Desired{}, fmt.Errorf("cluster %q: reading Secret %s: %w", name, key, err)
	}
	data := secret.Data[KubeconfigSecretKey]
	if len(data) == 0 {
		return inventory.Desired{}, inventory.Failed(ReasonInvalidKubeconfig,
			fmt.Errorf("cluster %q: Secret %s has no data under key %q", name, key, KubeconfigSecretKey))
	}
	cfg, err := pkgclusters.RESTConfigFromUntrustedKubeconfig(data, pkgclusters.KubeconfigPolicy{AllowedExecCommands: p.opts.AllowedExecCommands})
	if err != nil {
		return inventory.Desired{}, inventory.Failed(ReasonInvalidKubeconfig,
			fmt.Errorf("cluster %q: Secret %s, key %q: %w", name, key, KubeconfigSecretKey, redact.Error(err, data)))
	}
	return inventory.Desired{Name: name, Config: cfg, Hash: inventory.Hash(data), Sensitive: data}, nil
}

// DefaultIsReady reports whether a Cluster's control plane is initialised,
// per the contract of its API version: for v1beta2,
// status.initialization.controlPlaneInitialized; for v1beta1, the
// ControlPlaneInitialized condition or status.controlPlaneReady. An API server
// answers from then on, which is what engaging needs; workers may still be
// joining. Any other type is never ready.
func DefaultIsReady(obj client.Object) bool {
	switch c := obj.(type) {
	case *clusterv1.Cluster:
		return ptr.Deref(c.Status.Initialization.ControlPlaneInitialized, false)
	case *clusterv1beta1.Cluster:
		if c.Status.ControlPlaneReady {
			return true
		}
		for _, cond := range c.Status.Conditions {
			if cond.Type == clusterv1beta1.ControlPlaneInitializedCondition {
				return cond.Status == corev1.ConditionTrue
			}
		}
	}
	return false
}
