package clusterinventoryapi

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/apis/v1alpha1"
)

var (
	_ multicluster.Provider         = &Provider{}
	_ multicluster.ProviderRunnable = &Provider{}
	_ reconcile.Reconciler          = &Provider{}
)

// ControllerName is the name of the controller SetupWithManager registers.
const ControllerName = "multicluster-cluster-inventory-api-provider"

// Event reasons recorded on ClusterProfiles.
const (
	ReasonInvalidProfile   = "InvalidClusterProfile"
	ReasonNoAccessProvider = "NoAccessProvider"
	ReasonDuplicateName    = "DuplicateClusterName"
	ReasonEngageFailed     = "ClusterEngageFailed"
	ReasonEngaged          = "ClusterEngaged"
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
	// IsReady decides whether a profile's cluster should be engaged.
	// Default ControlPlaneHealthy.
	IsReady func(*v1alpha1.ClusterProfile) bool
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
// property, and fails for a profile without one.
func ClusterID(p *v1alpha1.ClusterProfile) (multicluster.ClusterName, error) {
	if id, ok := Property(p, v1alpha1.PropertyClusterID); ok && id != "" {
		return id, nil
	}
	return "", fmt.Errorf("ClusterProfile %s/%s has no %s property", p.Namespace, p.Name, v1alpha1.PropertyClusterID)
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
// Create it with New, pass it to mcmanager.New, and call SetupWithManager.
type Provider struct {
	pkgclusters.View // Get, IndexField, ClusterNames

	opts    Options
	members pkgclusters.Members
	started chan struct{} // closed once Start has bound the provider to its run

	mu        sync.Mutex
	running   bool
	client    client.Reader
	recorder  recorder.EventRecorder
	log       logr.Logger
	byProfile map[types.NamespacedName]multicluster.ClusterName // what each profile engages
	byCluster map[multicluster.ClusterName]profileInfo
	// waiting holds the profiles refused a name another profile holds; they
	// are reconciled again when it lets go.
	waiting map[multicluster.ClusterName]map[types.NamespacedName]bool
	// reported holds, per profile, the terminal failure last reported for
	// it: reconciling the same profile to the same failure again reports
	// nothing, so a broken source costs one log line and one Event.
	reported map[types.NamespacedName]string
	retry    chan event.TypedGenericEvent[*v1alpha1.ClusterProfile]
	runCtx   context.Context // the provider's run, set by Start
	sends    sync.WaitGroup  // goroutines sending on retry
}

// profileInfo is what the provider knows of an engaged name's profile.
type profileInfo struct {
	key        types.NamespacedName
	clusterSet string
}

// New returns a provider configured by opts. It fails if no access provider
// is configured, or one is incomplete.
func New(opts Options) (*Provider, error) {
	if err := validateAccessProviders(opts.AccessProviders); err != nil {
		return nil, fmt.Errorf("cluster-inventory-api provider: %w", err)
	}
	opts.AccessProviders = append([]AccessProvider(nil), opts.AccessProviders...)
	if opts.IsReady == nil {
		opts.IsReady = ControlPlaneHealthy
	}
	if opts.ClusterName == nil {
		opts.ClusterName = NamespacedName
	}
	p := &Provider{
		opts:      opts,
		started:   make(chan struct{}),
		log:       logr.Discard(),
		byProfile: map[types.NamespacedName]multicluster.ClusterName{},
		byCluster: map[multicluster.ClusterName]profileInfo{},
		waiting:   map[multicluster.ClusterName]map[types.NamespacedName]bool{},
		reported:  map[types.NamespacedName]string{},
		retry:     make(chan event.TypedGenericEvent[*v1alpha1.ClusterProfile]),
	}
	p.members = pkgclusters.Members{ClusterOptions: opts.ClusterOptions}
	p.View = p.members.View()
	return p, nil
}

// SetupWithManager registers the provider's controller on mgr's host
// cluster. ClusterProfiles are read through a cache of the provider's own,
// with a scheme of its own, so the manager's scheme need not know them.
//
// mgr must run the provider: pass the provider to mcmanager.New (or to a
// provider that runs it, such as the multi provider).
func (p *Provider) SetupWithManager(_ context.Context, mgr mcmanager.Manager) error {
	if mgr == nil {
		return errors.New("cluster-inventory-api provider: nil manager")
	}
	host := mgr.GetLocalManager()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return fmt.Errorf("cluster-inventory-api provider: %w", err)
	}
	copts := cache.Options{Scheme: scheme, Mapper: host.GetRESTMapper()}
	if p.opts.Namespace != "" {
		copts.DefaultNamespaces = map[string]cache.Config{p.opts.Namespace: {}}
	}
	profiles, err := cache.New(host.GetConfig(), copts)
	if err != nil {
		return fmt.Errorf("cluster-inventory-api provider: creating the ClusterProfile cache: %w", err)
	}
	// Started with the manager's caches, before controllers.
	if err := host.Add(profileCache{profiles}); err != nil {
		return fmt.Errorf("cluster-inventory-api provider: %w", err)
	}
	p.mu.Lock()
	if p.opts.ProfilePolicy.HubServer == "" {
		p.opts.ProfilePolicy.HubServer = host.GetConfig().Host
	}
	p.client = profiles
	p.recorder = host.GetEventRecorder(ControllerName)
	p.log = mgr.GetLogger().WithName("cluster-inventory-api-provider")
	p.mu.Unlock()

	return builder.ControllerManagedBy(host).
		Named(ControllerName).
		WatchesRawSource(source.Kind(profiles, &v1alpha1.ClusterProfile{}, &handler.TypedEnqueueRequestForObject[*v1alpha1.ClusterProfile]{})).
		WatchesRawSource(source.Channel(p.retry, &handler.TypedEnqueueRequestForObject[*v1alpha1.ClusterProfile]{})).
		WithOptions(controller.Options{
			// Every replica needs the fleet, not just the leader.
			NeedLeaderElection: ptr.To(false),
		}).
		Complete(p)
}

// profileCache lets the manager recognise the provider's cache as one, so
// that it starts with the caches.
type profileCache struct{ cache.Cache }

func (c profileCache) GetCache() cache.Cache { return c.Cache }

// Start binds the provider to the manager's run and engages clusters with
// aware until ctx ends. The Multi-Cluster Manager calls it.
func (p *Provider) Start(ctx context.Context, aware multicluster.Aware) error {
	p.mu.Lock()
	if p.running {
		p.mu.Unlock()
		return errors.New("cluster-inventory-api provider: already started")
	}
	p.running = true
	log := p.log
	p.mu.Unlock()

	runCtx, cancel := context.WithCancel(ctx)
	p.runCtx = runCtx // read only after started is closed
	p.members.Start(runCtx, aware, log)
	close(p.started)
	<-ctx.Done()
	cancel()
	p.members.Wait()
	p.sends.Wait()
	return nil
}

// ClusterSet returns the KEP-2149 ClusterSet (the clusterset.k8s.io
// property) of an engaged cluster's profile, and whether it has one.
func (p *Provider) ClusterSet(name multicluster.ClusterName) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	info, ok := p.byCluster[name]
	return info.clusterSet, ok && info.clusterSet != ""
}

// ProfileOf returns the namespace and name of the ClusterProfile a cluster
// comes from.
func (p *Provider) ProfileOf(name multicluster.ClusterName) (types.NamespacedName, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	info, ok := p.byCluster[name]
	return info.key, ok
}

// Reconcile brings the cluster of one ClusterProfile in line with it.
func (p *Provider) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	select {
	case <-p.started:
	case <-ctx.Done():
		return reconcile.Result{}, ctx.Err()
	}
	key := req.NamespacedName
	log := p.log.WithValues("clusterProfile", key.String())

	profile := &v1alpha1.ClusterProfile{}
	if err := p.client.Get(ctx, key, profile); err != nil {
		if apierrors.IsNotFound(err) {
			p.forgetReported(key)
			p.forget(log, key, "its ClusterProfile was deleted")
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading ClusterProfile %s: %w", key, err)
	}
	if !profile.DeletionTimestamp.IsZero() {
		p.forgetReported(key)
		p.forget(log, key, "its ClusterProfile is being deleted")
		return reconcile.Result{}, nil
	}
	ref := profileRef(profile)

	name, err := p.opts.ClusterName(profile)
	if err == nil {
		if err = pkgclusters.ValidateClusterName(name); err != nil {
			err = fmt.Errorf("ClusterProfile %s: %w", key, err)
		}
	}
	if err != nil {
		p.forget(log, key, "its ClusterProfile names no valid cluster")
		return p.terminal(profile, ReasonInvalidProfile, err)
	}
	log = log.WithValues("cluster", name)
	if old, ok := p.engagedAs(key); ok && old != name {
		p.forget(log.WithValues("previousName", old), key, "its ClusterProfile now names another cluster")
	}
	if owner, ok := p.ProfileOf(name); ok && owner != key {
		p.wait(name, key)
		return p.terminal(profile, ReasonDuplicateName, fmt.Errorf("cluster %q is already engaged from ClusterProfile %s: waiting for it to let go of the name", name, owner))
	}

	if !p.opts.IsReady(profile) {
		p.forget(log, key, "its ClusterProfile is not ready")
		return reconcile.Result{}, nil
	}

	// The errors below only a change of the profile can fix: they are
	// reported once, not retried.
	ap, entry, err := SelectAccessProvider(profile, p.opts.AccessProviders)
	if err != nil {
		return p.terminal(profile, ReasonNoAccessProvider, fmt.Errorf("cluster %q: ClusterProfile %s: %w", name, key, err))
	}
	cfg, hash, err := RESTConfig(ap, entry, p.opts.ProfilePolicy)
	if err != nil {
		return p.terminal(profile, ReasonInvalidProfile, fmt.Errorf("cluster %q: ClusterProfile %s: %w", name, key, err))
	}

	if old, ok := p.members.Hash(name); ok && old == hash {
		p.remember(key, name, profile) // properties may have changed
		return reconcile.Result{}, nil
	} else if ok {
		log.Info("Re-creating cluster: its access information changed", "accessProvider", ap.Name)
	} else {
		log.Info("Engaging cluster", "accessProvider", ap.Name)
	}
	p.remember(key, name, profile)
	p.members.Set(name, hash, cfg, func(err error) {
		if err != nil {
			p.warn(ref, ReasonEngageFailed, err)
			return
		}
		p.recorder.Eventf(ref, nil, corev1.EventTypeNormal, ReasonEngaged, "Engage", "Cluster %q engaged through access provider %q", name, ap.Name)
	})
	return reconcile.Result{}, nil
}

func (p *Provider) engagedAs(key types.NamespacedName) (multicluster.ClusterName, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	name, ok := p.byProfile[key]
	return name, ok
}

func (p *Provider) remember(key types.NamespacedName, name multicluster.ClusterName, profile *v1alpha1.ClusterProfile) {
	set, _ := Property(profile, v1alpha1.PropertyClusterSet)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byProfile[key] = name
	p.byCluster[name] = profileInfo{key: key, clusterSet: set}
	delete(p.reported, key)
	p.unwaitLocked(key)
}

// unwaitLocked drops the profile key from every name it waits for.
func (p *Provider) unwaitLocked(key types.NamespacedName) {
	for name, keys := range p.waiting {
		delete(keys, key)
		if len(keys) == 0 {
			delete(p.waiting, name)
		}
	}
}

// wait records that the profile key wants name, held by another profile.
func (p *Provider) wait(name multicluster.ClusterName, key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiting[name] == nil {
		p.waiting[name] = map[types.NamespacedName]bool{}
	}
	p.waiting[name][key] = true
}

// forget disengages the cluster a profile engaged, if any, and reconciles
// again the profiles that wanted its name.
func (p *Provider) forget(log logr.Logger, key types.NamespacedName, why string) {
	p.mu.Lock()
	p.unwaitLocked(key)
	name, ok := p.byProfile[key]
	delete(p.byProfile, key)
	var waiting map[types.NamespacedName]bool
	if ok && p.byCluster[name].key == key {
		delete(p.byCluster, name)
		waiting = p.waiting[name]
		delete(p.waiting, name)
	}
	p.mu.Unlock()
	if ok && p.members.Remove(name) {
		log.Info("Disengaged cluster: "+why, "cluster", name)
	}
	for other := range waiting {
		if other == key {
			continue
		}
		obj := &v1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: other.Namespace, Name: other.Name}}
		// Reconcile runs on the controller's worker, which the channel
		// source does not wait for: send from a goroutine of its own,
		// bounded by the provider's run.
		p.sends.Go(func() {
			select {
			case p.retry <- event.TypedGenericEvent[*v1alpha1.ClusterProfile]{Object: obj}:
			case <-p.runCtx.Done():
			}
		})
	}
}

// terminal reports a failure that only a change of the profile can fix: a
// Warning Event and an error log line the first time the profile's spec
// generation fails this way, nothing when it is reconciled again to the
// same failure (a resync, another status write). It asks for no retry.
func (p *Provider) terminal(profile *v1alpha1.ClusterProfile, reason string, err error) (reconcile.Result, error) {
	key := types.NamespacedName{Namespace: profile.Namespace, Name: profile.Name}
	seen := fmt.Sprintf("%d/%s/%s", profile.Generation, reason, err.Error())
	p.mu.Lock()
	again := p.reported[key] == seen
	p.reported[key] = seen
	p.mu.Unlock()
	if !again {
		p.warn(profileRef(profile), reason, err)
	}
	return reconcile.Result{}, nil
}

func (p *Provider) forgetReported(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.reported, key)
}

func (p *Provider) warn(ref *v1alpha1.ClusterProfile, reason string, err error) {
	p.log.Error(err, "ClusterProfile not usable", "clusterProfile", ref.Namespace+"/"+ref.Name, "reason", reason)
	p.recorder.Eventf(ref, nil, corev1.EventTypeWarning, reason, "Engage", "%s", err.Error())
}

// profileRef keeps what an Event needs of a profile, with its type set so
// that the manager's scheme need not know ClusterProfiles.
func profileRef(p *v1alpha1.ClusterProfile) *v1alpha1.ClusterProfile {
	return &v1alpha1.ClusterProfile{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ClusterProfile"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.Namespace, Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion,
		},
	}
}
