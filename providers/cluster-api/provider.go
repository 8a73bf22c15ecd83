package capi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	//lint:ignore SA1019 v1beta1 is deprecated upstream, and supported here for installations that serve nothing newer.
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

var (
	_ multicluster.Provider         = &Provider{}
	_ multicluster.ProviderRunnable = &Provider{}
	_ reconcile.Reconciler          = &Provider{}
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

	minRetryBackoff = time.Second
	maxRetryBackoff = 2 * time.Minute
)

// Event reasons recorded on Clusters.
const (
	ReasonKubeconfigMissing = "KubeconfigMissing"
	ReasonInvalidKubeconfig = "InvalidKubeconfig"
	ReasonEngageFailed      = "ClusterEngageFailed"
	ReasonEngaged           = "ClusterEngaged"
)

// Options configure a Provider. The zero value watches v1beta2 Clusters in
// every namespace and engages them once their control plane is initialised.
type Options struct {
	// ClusterOptions are applied to every cluster the provider creates.
	ClusterOptions []cluster.Option
	// ObjectToWatch is the Cluster type read from the host:
	// &v1beta2.Cluster{} (the default) or &v1beta1.Cluster{} for older
	// installations. Other types are refused by SetupWithManager.
	ObjectToWatch client.Object
	// IsReady reports whether a Cluster may be engaged; it receives an object
	// of ObjectToWatch's type. Defaults to DefaultIsReady.
	IsReady func(obj client.Object) bool
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
}

// Provider engages one cluster per ready Cluster API Cluster. Create it with
// New, pass it to mcmanager.New, and call SetupWithManager.
type Provider struct {
	pkgclusters.View // Get, IndexField, ClusterNames

	opts    Options
	members pkgclusters.Members
	started chan struct{} // closed once Start has bound the provider to its run

	mu       sync.Mutex
	running  bool
	scheme   *runtime.Scheme
	client   client.Reader
	recorder recorder.EventRecorder
	log      logr.Logger
}

// New returns a provider for the Clusters described by opts.
func New(opts Options) *Provider {
	if opts.ObjectToWatch == nil {
		opts.ObjectToWatch = &clusterv1.Cluster{}
	}
	if opts.IsReady == nil {
		opts.IsReady = DefaultIsReady
	}
	p := &Provider{opts: opts, started: make(chan struct{}), log: logr.Discard()}
	p.members = pkgclusters.Members{ClusterOptions: opts.ClusterOptions}
	p.View = p.members.View()
	return p
}

// SetupWithManager registers the provider's controller on mgr's host
// cluster. The controller reads Clusters and their Secrets through a cache
// of its own (with its own scheme, so the manager's scheme need not know
// Cluster API), limited to Options.Namespaces and to Secrets labelled
// ClusterNameLabel.
//
// mgr must run the provider: pass the provider to mcmanager.New (or to a
// provider that runs it, such as the multi provider).
func (p *Provider) SetupWithManager(_ context.Context, mgr mcmanager.Manager) error {
	if mgr == nil {
		return errors.New("capi provider: nil manager")
	}
	switch p.opts.ObjectToWatch.(type) {
	case *clusterv1.Cluster, *clusterv1beta1.Cluster:
	default:
		return fmt.Errorf("capi provider: ObjectToWatch %T is not supported: use a v1beta2 or v1beta1 Cluster of sigs.k8s.io/cluster-api/api/core", p.opts.ObjectToWatch)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, clusterv1.AddToScheme, clusterv1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			return fmt.Errorf("capi provider: building the scheme: %w", err)
		}
	}
	labelled, err := labels.NewRequirement(ClusterNameLabel, selection.Exists, nil)
	if err != nil {
		return fmt.Errorf("capi provider: %w", err)
	}
	host := mgr.GetLocalManager()
	opts := cache.Options{
		Scheme: scheme,
		Mapper: host.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Label: labels.NewSelector().Add(*labelled)},
		},
	}
	if len(p.opts.Namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range p.opts.Namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	objects, err := cache.New(host.GetConfig(), opts)
	if err != nil {
		return fmt.Errorf("capi provider: creating the cache: %w", err)
	}
	// Started with the manager's caches, before controllers.
	if err := host.Add(providerCache{objects}); err != nil {
		return fmt.Errorf("capi provider: %w", err)
	}
	p.mu.Lock()
	p.scheme = scheme
	p.client = objects
	p.recorder = host.GetEventRecorder(ControllerName)
	p.log = mgr.GetLogger().WithName("capi-provider")
	p.mu.Unlock()

	return builder.ControllerManagedBy(host).
		Named(ControllerName).
		WatchesRawSource(source.Kind(objects, p.opts.ObjectToWatch, &handler.EnqueueRequestForObject{})).
		WatchesRawSource(source.Kind(objects, &corev1.Secret{}, handler.TypedEnqueueRequestsFromMapFunc(secretToCluster))).
		WithOptions(controller.Options{
			// Every replica needs the fleet, not just the leader.
			NeedLeaderElection: ptr.To(false),
			// A missing or bad Secret is retried, slowly: each failure records an Event.
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](minRetryBackoff, maxRetryBackoff),
		}).
		Complete(p)
}

// secretToCluster maps a kubeconfig Secret to its Cluster.
func secretToCluster(_ context.Context, s *corev1.Secret) []reconcile.Request {
	name, ok := strings.CutSuffix(s.Name, KubeconfigSecretSuffix)
	if !ok || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: s.Namespace, Name: name}}}
}

// providerCache lets the manager recognise the provider's cache as one, so
// that it starts with the caches.
type providerCache struct{ cache.Cache }

func (c providerCache) GetCache() cache.Cache { return c.Cache }

// Start binds the provider to the manager's run and engages clusters with
// aware until ctx ends. The Multi-Cluster Manager calls it.
func (p *Provider) Start(ctx context.Context, aware multicluster.Aware) error {
	p.mu.Lock()
	if p.running {
		p.mu.Unlock()
		return errors.New("capi provider: already started")
	}
	p.running = true
	log := p.log
	p.mu.Unlock()

	runCtx, cancel := context.WithCancel(ctx)
	p.members.Start(runCtx, aware, log)
	close(p.started)
	<-ctx.Done()
	cancel()
	p.members.Wait()
	return nil
}

// Reconcile brings the member of one Cluster in line with the Cluster and
// its kubeconfig Secret.
func (p *Provider) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	select {
	case <-p.started:
	case <-ctx.Done():
		return reconcile.Result{}, ctx.Err()
	}
	name := req.Namespace + "/" + req.Name
	log := p.log.WithValues("cluster", name)

	obj, ok := p.opts.ObjectToWatch.DeepCopyObject().(client.Object)
	if !ok {
		return reconcile.Result{}, fmt.Errorf("cluster %q: ObjectToWatch %T is not a client.Object", name, p.opts.ObjectToWatch)
	}
	if err := p.client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			p.disengage(log, name, "its Cluster was deleted")
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("cluster %q: reading the Cluster: %w", name, err)
	}
	switch {
	case !obj.GetDeletionTimestamp().IsZero():
		p.disengage(log, name, "its Cluster is being deleted")
		return reconcile.Result{}, nil
	case !p.selected(obj):
		p.disengage(log, name, "the Predicates no longer select its Cluster")
		return reconcile.Result{}, nil
	case !p.opts.IsReady(obj):
		p.disengage(log, name, "its Cluster is not ready")
		return reconcile.Result{}, nil
	}
	ref, err := p.ref(obj)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("cluster %q: %w", name, err)
	}

	secretKey := client.ObjectKey{Namespace: req.Namespace, Name: req.Name + KubeconfigSecretSuffix}
	secret := &corev1.Secret{}
	if err := p.client.Get(ctx, secretKey, secret); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("cluster %q: reading Secret %s: %w", name, secretKey, err)
		}
		// The credentials were withdrawn: stop using the old ones.
		p.disengage(log, name, "its kubeconfig Secret is gone")
		err := fmt.Errorf("cluster %q: kubeconfig Secret %s not found (it must carry the label %s)", name, secretKey, ClusterNameLabel)
		p.warn(ref, ReasonKubeconfigMissing, err)
		return reconcile.Result{}, err
	}
	data := secret.Data[KubeconfigSecretKey]
	if len(data) == 0 {
		err := fmt.Errorf("cluster %q: Secret %s has no data under key %q", name, secretKey, KubeconfigSecretKey)
		p.warn(ref, ReasonInvalidKubeconfig, err)
		return reconcile.Result{}, err
	}
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])
	old, known := p.members.Hash(name)
	if known && old == hash {
		return reconcile.Result{}, nil // unchanged kubeconfig: status change or resync
	}
	cfg, err := pkgclusters.RESTConfigFromUntrustedKubeconfig(data, pkgclusters.KubeconfigPolicy{AllowedExecCommands: p.opts.AllowedExecCommands})
	if err != nil {
		err = fmt.Errorf("cluster %q: Secret %s, key %q: %w", name, secretKey, KubeconfigSecretKey, err)
		p.warn(ref, ReasonInvalidKubeconfig, err)
		return reconcile.Result{}, err
	}
	if known {
		log.Info("Re-creating cluster: its kubeconfig changed")
	} else {
		log.Info("Engaging cluster")
	}
	p.members.Set(name, hash, cfg, func(err error) {
		if err != nil {
			p.warn(ref, ReasonEngageFailed, err)
			return
		}
		p.recorder.Eventf(ref, nil, corev1.EventTypeNormal, ReasonEngaged, "Engage", "Cluster %q engaged", name)
	})
	return reconcile.Result{}, nil
}

// selected reports whether every predicate accepts obj.
func (p *Provider) selected(obj client.Object) bool {
	for _, pred := range p.opts.Predicates {
		if !pred.Generic(event.GenericEvent{Object: obj}) {
			return false
		}
	}
	return true
}

func (p *Provider) disengage(log logr.Logger, name, reason string) {
	if p.members.Remove(name) {
		log.Info("Disengaged cluster: " + reason)
	}
}

func (p *Provider) warn(ref runtime.Object, reason string, err error) {
	p.recorder.Eventf(ref, nil, corev1.EventTypeWarning, reason, "Engage", "%s", err.Error())
}

// ref keeps what an Event needs of a Cluster; its type is set so that the
// recorder does not need Cluster API in the manager's scheme.
func (p *Provider) ref(obj client.Object) (*metav1.PartialObjectMetadata, error) {
	gvk, err := apiutil.GVKForObject(obj, p.scheme)
	if err != nil {
		return nil, err
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(),
		},
	}, nil
}
