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
	"k8s.io/apimachinery/pkg/types"
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
	// UpstreamKubeconfigSecretLabel is the label key of the upstream
	// multicluster-runtime design. With Options.KubeconfigSecretLabel unset,
	// Secrets labelled with it (value "true") are read too, so that Secrets
	// written for that design work unchanged.
	UpstreamKubeconfigSecretLabel = "sigs.k8s.io/multicluster-runtime-kubeconfig"
	// DefaultKubeconfigSecretKey is the data key holding the kubeconfig.
	DefaultKubeconfigSecretKey = "kubeconfig"
	// ControllerName is the name of the controller SetupWithManager registers.
	ControllerName = "multicluster-kubeconfig-provider"
)

// Event reasons recorded on Secrets.
const (
	ReasonInvalidKubeconfig = "InvalidKubeconfig"
	// ReasonKubeconfigRefused: the kubeconfig asks for something a Secret is
	// not trusted with (an exec or auth-provider plugin, a local file).
	ReasonKubeconfigRefused = "KubeconfigRefused"
	ReasonEngageFailed      = "ClusterEngageFailed"
	ReasonEngaged           = "ClusterEngaged"
)

// Options configure a Provider. The zero value uses the defaults above.
type Options struct {
	// Namespace holds the kubeconfig Secrets. Defaults to DefaultNamespace.
	Namespace string
	// KubeconfigSecretLabel is the label key that marks kubeconfig Secrets;
	// its value must be "true". Defaults to DefaultKubeconfigSecretLabel and
	// UpstreamKubeconfigSecretLabel, either of which marks a Secret; set, it
	// is the only one.
	KubeconfigSecretLabel string
	// KubeconfigSecretKey is the data key holding the kubeconfig. Defaults to
	// DefaultKubeconfigSecretKey.
	KubeconfigSecretKey string
	// ClusterOptions are applied to every cluster the provider creates.
	ClusterOptions []cluster.Option
	// KubeconfigPolicy says what the kubeconfigs of Secrets may contain.
	// Anyone who can write a labelled Secret in Namespace chooses them, so
	// the zero value refuses exec and auth-provider plugins, every local
	// file reference (token, certificate, key and CA files), proxy-url,
	// insecure-skip-tls-verify and tls-server-name: the Secret gets a
	// KubeconfigRefused Warning Event. List the exec plugin commands your
	// installation relies on in KubeconfigPolicy.AllowedExecCommands.
	KubeconfigPolicy pkgclusters.KubeconfigPolicy
	// ControllerName names the controller SetupWithManager registers, its
	// logger and its Events' reporting controller. Defaults to ControllerName;
	// set it to run two providers in one manager.
	ControllerName string
}

// Provider engages one cluster per labelled kubeconfig Secret. Create it with
// New, pass it to mcmanager.New, and call SetupWithManager.
type Provider struct {
	pkgclusters.View // Get, IndexField, ClusterNames

	opts    Options
	members pkgclusters.Members
	started chan struct{} // closed once Start has bound the provider to its run

	labels []string // label keys that mark a kubeconfig Secret

	mu       sync.Mutex
	running  bool
	readers  []client.Reader // one cache per label key
	recorder recorder.EventRecorder
	log      logr.Logger
}

// New returns a provider for the Secrets described by opts.
func New(opts Options) *Provider {
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	labels := []string{opts.KubeconfigSecretLabel}
	if opts.KubeconfigSecretLabel == "" {
		opts.KubeconfigSecretLabel = DefaultKubeconfigSecretLabel
		labels = []string{DefaultKubeconfigSecretLabel, UpstreamKubeconfigSecretLabel}
	}
	if opts.KubeconfigSecretKey == "" {
		opts.KubeconfigSecretKey = DefaultKubeconfigSecretKey
	}
	if opts.ControllerName == "" {
		opts.ControllerName = ControllerName
	}
	p := &Provider{opts: opts, labels: labels, started: make(chan struct{}), log: logr.Discard()}
	p.members = pkgclusters.Members{ClusterOptions: opts.ClusterOptions}
	p.View = p.members.View()
	return p
}

// SetupWithManager registers the provider's controller on mgr's host
// cluster. The controller reads Secrets through caches of its own (one per
// label key), limited to Options.Namespace and to Secrets carrying the label:
// the provider needs no access to other Secrets, and keeps no others in
// memory. A Secret that loses the label leaves that cache, which disengages
// its cluster.
//
// mgr must run the provider: pass the provider to mcmanager.New (or to a
// provider that runs it, such as the multi provider).
func (p *Provider) SetupWithManager(_ context.Context, mgr mcmanager.Manager) error {
	if mgr == nil {
		return errors.New("kubeconfig provider: nil manager")
	}
	host := mgr.GetLocalManager()
	b := builder.ControllerManagedBy(host).
		Named(p.opts.ControllerName).
		WithOptions(controller.Options{
			// Every replica needs the fleet, not just the leader.
			NeedLeaderElection: ptr.To(false),
		})
	readers := make([]client.Reader, 0, len(p.labels))
	for _, key := range p.labels {
		secrets, err := cache.New(host.GetConfig(), cache.Options{
			Scheme:            host.GetScheme(),
			Mapper:            host.GetRESTMapper(),
			DefaultNamespaces: map[string]cache.Config{p.opts.Namespace: {}},
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Secret{}: {Label: labels.SelectorFromSet(labels.Set{key: "true"})},
			},
		})
		if err != nil {
			return fmt.Errorf("kubeconfig provider: creating the Secret cache for namespace %q, label %q: %w", p.opts.Namespace, key, err)
		}
		// Started with the manager's caches, before controllers.
		if err := host.Add(secretCache{secrets}); err != nil {
			return fmt.Errorf("kubeconfig provider: %w", err)
		}
		readers = append(readers, secrets)
		b = b.WatchesRawSource(source.Kind(secrets, &corev1.Secret{}, &handler.TypedEnqueueRequestForObject[*corev1.Secret]{}))
	}
	p.mu.Lock()
	p.readers = readers
	p.recorder = host.GetEventRecorder(p.opts.ControllerName)
	p.log = mgr.GetLogger().WithName("kubeconfig-provider")
	p.mu.Unlock()

	return b.Complete(p)
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
	// A cluster that rejects its credentials: read its Secret again at once
	// (a rotation whose event has not arrived yet is picked up now).
	p.members.Refresh = func(name multicluster.ClusterName) {
		req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.opts.Namespace, Name: name}}
		if _, err := p.Reconcile(runCtx, req); err != nil && runCtx.Err() == nil {
			log.Error(redact.Err(err), "Failed to re-read the kubeconfig Secret of a cluster that rejects its credentials", "cluster", name)
		}
	}
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

	secret, err := p.labelledSecret(ctx, req)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("cluster %q: reading Secret %s: %w", name, req.NamespacedName, err)
	}
	if secret == nil {
		if p.members.Remove(name) {
			log.Info("Disengaged cluster: its Secret was deleted or is no longer labelled", "labels", p.labels)
		}
		return reconcile.Result{}, nil
	}
	if err := pkgclusters.ValidateClusterName(name); err != nil {
		err = fmt.Errorf("cluster name of Secret %s: %w", req.NamespacedName, err)
		p.warn(secretRef(secret), ReasonInvalidKubeconfig, err)
		return reconcile.Result{}, reconcile.TerminalError(err)
	}

	data := secret.Data[p.opts.KubeconfigSecretKey]
	if len(data) == 0 {
		err := fmt.Errorf("cluster %q: Secret %s has no data under key %q", name, req.NamespacedName, p.opts.KubeconfigSecretKey)
		p.warn(secretRef(secret), ReasonInvalidKubeconfig, err)
		return reconcile.Result{}, reconcile.TerminalError(err) // until the Secret changes
	}
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])
	if old, ok := p.members.Hash(name); ok && old == hash {
		return reconcile.Result{}, nil // unchanged kubeconfig: metadata change or resync
	}
	cfg, err := pkgclusters.RESTConfigFromUntrustedKubeconfig(data, p.opts.KubeconfigPolicy)
	if err != nil {
		reason := ReasonInvalidKubeconfig
		if errors.Is(err, pkgclusters.ErrKubeconfigRefused) {
			reason = ReasonKubeconfigRefused
		}
		// A bad kubeconfig stays bad until the Secret changes, which
		// reconciles it again: no retries.
		err = fmt.Errorf("cluster %q: Secret %s: kubeconfig under key %q: %w", name, req.NamespacedName, p.opts.KubeconfigSecretKey, redact.Error(err, data))
		p.warn(secretRef(secret), reason, err)
		return reconcile.Result{}, reconcile.TerminalError(err)
	}

	if _, ok := p.members.Hash(name); ok {
		log.Info("Re-creating cluster: its kubeconfig changed")
	} else {
		log.Info("Engaging cluster")
	}
	ref := secretRef(secret)
	p.members.Set(name, hash, cfg, func(err error) {
		if err != nil {
			p.warn(ref, ReasonEngageFailed, redact.Error(err, data))
			return
		}
		p.recorder.Eventf(ref, nil, corev1.EventTypeNormal, ReasonEngaged, "Engage", "Cluster %q engaged", name)
	})
	return reconcile.Result{}, nil
}

// labelledSecret returns the Secret of req if it carries one of the label
// keys with the value "true" and is not being deleted, else nil.
func (p *Provider) labelledSecret(ctx context.Context, req reconcile.Request) (*corev1.Secret, error) {
	for _, r := range p.readers {
		secret := &corev1.Secret{}
		if err := r.Get(ctx, req.NamespacedName, secret); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		if !secret.DeletionTimestamp.IsZero() {
			return nil, nil
		}
		for _, key := range p.labels {
			if secret.Labels[key] == "true" {
				return secret, nil
			}
		}
	}
	return nil, nil
}

// warn records a Warning Event on the Secret. Everything it says passes
// through redaction: errors may quote server URLs and kubeconfig content.
func (p *Provider) warn(secret *corev1.Secret, reason string, err error) {
	p.recorder.Eventf(secret, nil, corev1.EventTypeWarning, reason, "Engage", "%s", redact.Err(err).Error())
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
