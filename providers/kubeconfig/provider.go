package kubeconfig

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/mcruntime/multicluster-runtime/internal/redact"
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
	// DefaultNamespace is the namespace watched when Options.Namespace is empty.
	DefaultNamespace = "default"
	// DefaultKubeconfigSecretLabel is the label key a Secret must carry, with
	// the value "true", to be read.
	DefaultKubeconfigSecretLabel = "multicluster-runtime.io/kubeconfig"
	// DefaultKubeconfigSecretKey is the data key holding the kubeconfig.
	DefaultKubeconfigSecretKey = "kubeconfig"
	// ControllerName is the name of the controller SetupWithManager registers.
	ControllerName = "multicluster-kubeconfig-provider"
)

// Event reasons recorded on Secrets.
const (
	ReasonInvalidKubeconfig = "InvalidKubeconfig"
	ReasonEngageFailed      = "ClusterEngageFailed"
	ReasonEngaged           = "ClusterEngaged"
)

// Options configure a Provider. The zero value uses the defaults above.
type Options struct {
	// Namespace holds the kubeconfig Secrets. Defaults to DefaultNamespace.
	Namespace string
	// KubeconfigSecretLabel is the label key that marks kubeconfig Secrets;
	// its value must be "true". Defaults to DefaultKubeconfigSecretLabel.
	KubeconfigSecretLabel string
	// KubeconfigSecretKey is the data key holding the kubeconfig. Defaults to
	// DefaultKubeconfigSecretKey.
	KubeconfigSecretKey string
	// ClusterOptions are applied to every cluster the provider creates.
	ClusterOptions []cluster.Option
}

// Provider engages one cluster per labelled kubeconfig Secret. Create it with
// New, pass it to mcmanager.New, and call SetupWithManager.
type Provider struct {
	opts    Options
	members pkgclusters.Members
	started chan struct{} // closed once Start has bound the provider to its run

	mu       sync.Mutex
	running  bool
	client   client.Reader
	recorder recorder.EventRecorder
	log      logr.Logger
}

// New returns a provider for the Secrets described by opts.
func New(opts Options) *Provider {
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.KubeconfigSecretLabel == "" {
		opts.KubeconfigSecretLabel = DefaultKubeconfigSecretLabel
	}
	if opts.KubeconfigSecretKey == "" {
		opts.KubeconfigSecretKey = DefaultKubeconfigSecretKey
	}
	p := &Provider{opts: opts, started: make(chan struct{}), log: logr.Discard()}
	p.members = pkgclusters.Members{ClusterOptions: opts.ClusterOptions}
	return p
}

// SetupWithManager registers the provider's controller on mgr's host
// cluster. The controller reads Secrets through a cache of its own, limited
// to Options.Namespace and to Secrets carrying the label: the provider needs
// no access to other Secrets, and keeps no others in memory. A Secret that
// loses the label leaves that cache, which disengages its cluster.
//
// mgr must run the provider: pass the provider to mcmanager.New (or to a
// provider that runs it, such as the multi provider).
func (p *Provider) SetupWithManager(_ context.Context, mgr mcmanager.Manager) error {
	if mgr == nil {
		return errors.New("kubeconfig provider: nil manager")
	}
	host := mgr.GetLocalManager()
	secrets, err := cache.New(host.GetConfig(), cache.Options{
		Scheme:            host.GetScheme(),
		Mapper:            host.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{p.opts.Namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Label: labels.SelectorFromSet(labels.Set{p.opts.KubeconfigSecretLabel: "true"})},
		},
	})
	if err != nil {
		return fmt.Errorf("kubeconfig provider: creating the Secret cache for namespace %q: %w", p.opts.Namespace, err)
	}
	// Started with the manager's caches, before controllers.
	if err := host.Add(secretCache{secrets}); err != nil {
		return fmt.Errorf("kubeconfig provider: %w", err)
	}
	p.mu.Lock()
	p.client = secrets
	p.recorder = host.GetEventRecorder(ControllerName)
	p.log = mgr.GetLogger().WithName("kubeconfig-provider")
	p.mu.Unlock()

	return builder.ControllerManagedBy(host).
		Named(ControllerName).
		WatchesRawSource(source.Kind(secrets, &corev1.Secret{}, &handler.TypedEnqueueRequestForObject[*corev1.Secret]{})).
		WithOptions(controller.Options{
			// Every replica needs the fleet, not just the leader.
			NeedLeaderElection: ptr.To(false),
		}).
		Complete(p)
}

// secretCache lets the manager recognise the provider's cache as one, so that
// it starts with the caches.
type secretCache struct{ cache.Cache }

func (c secretCache) GetCache() cache.Cache { return c.Cache }

// Start binds the provider to the manager's run and engages clusters with
// aware until ctx ends. The Multi-Cluster Manager calls it.
func (p *Provider) Start(ctx context.Context, aware multicluster.Aware) error {
	p.mu.Lock()
	if p.running {
		p.mu.Unlock()
		return errors.New("kubeconfig provider: already started")
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

// Reconcile brings the cluster of one Secret in line with the Secret.
func (p *Provider) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	select {
	case <-p.started:
	case <-ctx.Done():
		return reconcile.Result{}, ctx.Err()
	}
	name := req.Name
	log := p.log.WithValues("cluster", name, "secret", req.NamespacedName.String())

	secret := &corev1.Secret{}
	if err := p.client.Get(ctx, req.NamespacedName, secret); err != nil {
		if apierrors.IsNotFound(err) {
			if p.members.Remove(name) {
				log.Info("Disengaged cluster: its Secret was deleted")
			}
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("cluster %q: reading Secret %s: %w", name, req.NamespacedName, err)
	}
	if secret.Labels[p.opts.KubeconfigSecretLabel] != "true" || !secret.DeletionTimestamp.IsZero() {
		if p.members.Remove(name) {
			log.Info("Disengaged cluster: its Secret is no longer labelled " + p.opts.KubeconfigSecretLabel + "=true")
		}
		return reconcile.Result{}, nil
	}

	data := secret.Data[p.opts.KubeconfigSecretKey]
	if len(data) == 0 {
		err := fmt.Errorf("cluster %q: Secret %s has no data under key %q", name, req.NamespacedName, p.opts.KubeconfigSecretKey)
		p.warn(secretRef(secret), ReasonInvalidKubeconfig, err)
		return reconcile.Result{}, err
	}
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])
	if old, ok := p.members.Hash(name); ok && old == hash {
		return reconcile.Result{}, nil // unchanged kubeconfig: metadata change or resync
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		err = fmt.Errorf("cluster %q: Secret %s: malformed kubeconfig under key %q: %w", name, req.NamespacedName, p.opts.KubeconfigSecretKey, redact.Error(err, data))
		p.warn(secretRef(secret), ReasonInvalidKubeconfig, err)
		return reconcile.Result{}, err
	}

	if _, ok := p.members.Hash(name); ok {
		log.Info("Re-creating cluster: its kubeconfig changed")
	} else {
		log.Info("Engaging cluster")
	}
	ref := secretRef(secret)
	p.members.Set(name, hash, cfg, func(err error) {
		if err != nil {
			p.warn(ref, ReasonEngageFailed, err)
			return
		}
		p.recorder.Eventf(ref, nil, corev1.EventTypeNormal, ReasonEngaged, "Engage", "Cluster %q engaged", name)
	})
	return reconcile.Result{}, nil
}

func (p *Provider) warn(secret *corev1.Secret, reason string, err error) {
	p.recorder.Eventf(secret, nil, corev1.EventTypeWarning, reason, "Engage", "%s", err.Error())
}

// secretRef keeps what an Event needs of a Secret, and not its data.
func secretRef(s *corev1.Secret) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Namespace, Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion,
		},
	}
}

// Get returns the engaged cluster of name, or an error wrapping
// multicluster.ErrClusterNotFound.
func (p *Provider) Get(ctx context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	return p.members.Get(ctx, name)
}

// IndexField registers an index on every cluster of the provider, now and later.
func (p *Provider) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	return p.members.IndexField(ctx, obj, field, extract)
}

// ClusterNames returns the names of the engaged clusters, sorted.
func (p *Provider) ClusterNames() []multicluster.ClusterName { return p.members.ClusterNames() }
