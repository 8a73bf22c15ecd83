package inventory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/mcruntime/multicluster-runtime/internal/redact"
	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

var (
	_ multicluster.Provider          = &Kit[*corev1.Secret]{}
	_ multicluster.ProviderRunnable  = &Kit[*corev1.Secret]{}
	_ multicluster.ListingProvider   = &Kit[*corev1.Secret]{}
	_ reconcile.Reconciler           = &Kit[*corev1.Secret]{}
	_ mcmanager.ClusterHealthChecker = &Kit[*corev1.Secret]{}
)

// Kit runs an inventory provider. Embed *Kit[T] in the provider.
type Kit[T client.Object] struct {
	clusters.View // Get, IndexField, ClusterNames

	opts    Options[T]
	members clusters.Members
	started chan struct{} // watch mode: closed once the start-up listing is taken
	listed  chan struct{}
	relists chan struct{} // listing mode: list again now

	mu       sync.Mutex
	running  bool
	caches   []cache.Cache // one per selector; the first also holds Related
	scheme   *runtime.Scheme
	kind     string
	gvk      schema.GroupVersionKind
	recorder recorder.EventRecorder
	log      logr.Logger
	queue    workqueue.TypedRateLimitingInterface[reconcile.Request]
	names    // who holds which name, and who waits for one
	listing  // what Listed waits for
}

// New returns a kit for the inventory opts describes; SetupWithManager
// checks opts.
func New[T client.Object](opts Options[T]) *Kit[T] {
	if opts.Interval <= 0 {
		opts.Interval = 5 * time.Second
	}
	if opts.Watch == nil {
		opts.Watch = every(opts.Interval)
	}
	if opts.InvalidNameReason == "" {
		opts.InvalidNameReason = ReasonInvalidName
	}
	k := &Kit[T]{opts: opts, started: make(chan struct{}), listed: make(chan struct{}), relists: make(chan struct{}, 1), log: logr.Discard()}
	k.members = clusters.Members{ClusterOptions: opts.ClusterOptions}
	k.View = k.members.View()
	k.names.init()
	return k
}

// SetupWithManager registers the kit's cache and host controller on mgr's
// host cluster. mgr must run the provider: pass it to mcmanager.New (or to a
// provider that runs it, such as the multi provider).
func (k *Kit[T]) SetupWithManager(_ context.Context, mgr mcmanager.Manager) error {
	if mgr == nil || k.opts.Name == "" || any(k.opts.Object) == nil || k.opts.Desire == nil {
		return fmt.Errorf("inventory provider %q: a manager, Options.Name, Object and Desire are required", k.opts.Name)
	}
	host := mgr.GetLocalManager()
	scheme := k.opts.Scheme
	if scheme == nil {
		scheme = host.GetScheme()
	}
	gvk, err := apiutil.GVKForObject(k.opts.Object, scheme)
	if err != nil {
		return fmt.Errorf("%s: %w", k.opts.Name, err)
	}
	b := builder.ControllerManagedBy(host).Named(k.opts.Name).WithOptions(controller.Options{
		NeedLeaderElection: ptr.To(false), // every replica needs the fleet, not just the leader
		RateLimiter:        k.opts.RateLimiter,
	})
	selectors := k.opts.Selectors
	if len(selectors) == 0 {
		selectors = []labels.Selector{nil}
	}
	var caches []cache.Cache
	for i, sel := range selectors {
		opts := cache.Options{Scheme: scheme, Mapper: host.GetRESTMapper(),
			ByObject: map[client.Object]cache.ByObject{k.opts.Object: {Label: sel}}}
		for _, ns := range k.opts.Namespaces {
			if opts.DefaultNamespaces == nil {
				opts.DefaultNamespaces = map[string]cache.Config{}
			}
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
		related := k.opts.Related
		if i > 0 {
			related = nil
		}
		for _, r := range related {
			opts.ByObject[r.Object] = cache.ByObject{Label: r.Selector}
		}
		c, err := cache.New(host.GetConfig(), opts)
		if err != nil {
			return fmt.Errorf("%s: creating the cache for %s: %w", k.opts.Name, gvk.Kind, err)
		}
		if err := host.Add(hostCache{c}); err != nil { // started with the caches, before controllers
			return fmt.Errorf("%s: %w", k.opts.Name, err)
		}
		caches = append(caches, c)
		b = b.WatchesRawSource(source.Kind(c, k.opts.Object, &handler.TypedEnqueueRequestForObject[T]{}))
		for _, r := range related {
			b = b.WatchesRawSource(source.Kind(c, r.Object, handler.EnqueueRequestsFromMapFunc(owners(r.Owners))))
		}
	}
	b = b.WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		k.mu.Lock()
		defer k.mu.Unlock()
		k.queue = q
		return nil
	}))
	k.mu.Lock()
	k.caches, k.scheme, k.gvk, k.kind = caches, scheme, gvk, gvk.Kind
	k.recorder = host.GetEventRecorder(k.opts.Name)
	k.log = mgr.GetLogger().WithName(k.opts.Name)
	k.mu.Unlock()
	return b.Complete(k)
}

func owners(f func(client.Object) []client.ObjectKey) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		var reqs []reconcile.Request
		for _, key := range f(o) {
			reqs = append(reqs, reconcile.Request{NamespacedName: key})
		}
		return reqs
	}
}

// hostCache lets the manager recognise the kit's cache as one, so that it
// starts with the caches.
type hostCache struct{ cache.Cache }

func (c hostCache) GetCache() cache.Cache { return c.Cache }

// Start binds the kit to the manager's run and engages clusters with aware
// until ctx ends. The Multi-Cluster Manager calls it.
func (k *Kit[T]) Start(ctx context.Context, aware multicluster.Aware) error {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	log, err := k.begin(runCtx, aware)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	failed := make(chan error, 1)
	if k.opts.List == nil {
		wg.Go(func() { k.list(runCtx) })
	} else {
		wg.Go(func() { k.poll(runCtx, log) })
		wg.Go(func() {
			if err := k.opts.Watch(logf.IntoContext(runCtx, log), k.relist); err != nil && runCtx.Err() == nil {
				failed <- fmt.Errorf("%s: %w", k.opts.Name, err)
			}
		})
	}
	select {
	case <-ctx.Done():
	case err = <-failed:
	}
	cancel()
	wg.Wait()
	k.members.Wait()
	return err
}

// RunOnce is Start for a program that needs its fleet once (a one-shot
// job), for a kit with a List: it lists once, hands what it lists to aware
// (the manager, which engages the clusters as Start's) and returns without
// waiting for them; nothing is listed again, so later changes of the
// inventory change nothing. The clusters run until ctx ends. A kit runs
// RunOnce or Start, once.
func (k *Kit[T]) RunOnce(ctx context.Context, aware multicluster.Aware) error {
	if k.opts.List == nil {
		return fmt.Errorf("%s: RunOnce reads a listed inventory (Options.List); this one is watched: use Start", k.opts.Name)
	}
	log, err := k.begin(ctx, aware)
	if err != nil {
		return err
	}
	return k.publishListing(ctx, log)
}

// begin marks the kit started (Start or RunOnce, once), binds its members
// to ctx and aware, and returns its logger.
func (k *Kit[T]) begin(ctx context.Context, aware multicluster.Aware) (logr.Logger, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.running {
		return logr.Logger{}, fmt.Errorf("%s: %w", k.opts.Name, multicluster.ErrAlreadyStarted)
	}
	if k.caches == nil && k.opts.List == nil {
		return logr.Logger{}, fmt.Errorf("%s: started before SetupWithManager: it would read no inventory", k.opts.Name)
	}
	k.running = true
	log := k.log
	// A cluster that rejects its credentials: read its source again now (a
	// rotation whose event has not arrived yet is picked up).
	k.members.Refresh = k.requeue
	if k.opts.List != nil {
		log = logf.FromContext(ctx).WithName(k.opts.Name)
		k.members.Refresh = func(multicluster.ClusterName) { k.relist() }
	}
	k.members.Start(ctx, aware, log)
	return log, nil
}

// Reconcile brings the cluster of one inventory object in line with it.
func (k *Kit[T]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	select {
	case <-k.started:
	case <-ctx.Done():
		return reconcile.Result{}, ctx.Err()
	}
	key := req.NamespacedName
	defer k.considered(key)
	log := k.log.WithValues("source", k.kind+" "+key.String())

	obj, found, err := k.get(ctx, key)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("reading %s %s: %w", k.kind, key, err)
	}
	if !found {
		k.forgetReported(key)
		k.release(log, key, fmt.Sprintf("its %s was deleted or is no longer selected", k.kind))
		return reconcile.Result{}, nil
	}
	d, err := k.opts.Desire(ctx, k.caches[0], obj)
	if err == nil && d.Withdrawn == "" {
		log = log.WithValues("cluster", d.Name)
		err = k.claim(log, key, d.Name)
	}
	if d.Withdrawn != "" {
		k.release(log, key, d.Withdrawn)
	}
	if err != nil {
		return k.report(log, obj, err)
	}
	if d.Withdrawn == "" {
		d.Paused = d.Paused || k.pausedBy(log, obj)
		k.publish(log, k.ref(obj), sourceOf(obj), d)
	}
	return reconcile.Result{}, nil
}

// sourceOf is what the settings hook sees of obj, kept with the member until
// it is built again: obj without its managed fields and, for a Secret,
// without its data, so that the hook never sees credentials.
func sourceOf(obj client.Object) client.Object {
	if s, ok := obj.(*corev1.Secret); ok {
		obj = &corev1.Secret{TypeMeta: s.TypeMeta, ObjectMeta: *s.ObjectMeta.DeepCopy(), Type: s.Type}
	}
	obj.SetManagedFields(nil)
	return obj
}

// pausedBy reads PausedAnnotation of obj; another value than "true" or
// "false" is reported once per change of obj and does not pause.
func (k *Kit[T]) pausedBy(log logr.Logger, obj T) bool {
	v, ok := obj.GetAnnotations()[PausedAnnotation]
	switch {
	case !ok || v == "false":
		return false
	case v == "true":
		return true
	}
	err := fmt.Errorf("annotation %s is %q, neither \"true\" nor \"false\": the cluster is not paused", PausedAnnotation, redact.Value(v))
	if k.reportOnce(client.ObjectKeyFromObject(obj), "paused/"+obj.GetResourceVersion()) {
		log.Error(err, "Ignoring an invalid annotation")
		k.warn(k.ref(obj), ReasonInvalidPausedAnnotation, err)
	}
	return false
}

// get returns the object of key if a cache holds it and it is not being
// deleted.
func (k *Kit[T]) get(ctx context.Context, key client.ObjectKey) (obj T, found bool, err error) {
	for _, c := range k.caches {
		obj = k.opts.Object.DeepCopyObject().(T)
		if err := c.Get(ctx, key, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return obj, false, err
		}
		return obj, obj.GetDeletionTimestamp().IsZero(), nil
	}
	return obj, false, nil
}

// publish wants d's cluster to run; the engine builds and engages it, and
// its report becomes an Event on ref. source, if not nil, is the object d was
// read from, for the settings hook (clusters.SettingsFunc).
func (k *Kit[T]) publish(log logr.Logger, ref, source client.Object, d Desired) {
	log = log.WithValues(d.LogValues...)
	replaced, changed := k.members.Set(d.Name, d.Hash, d.Config, func(err error) {
		if expiring := (*clusters.ExpiringCredentialsError)(nil); errors.As(err, &expiring) {
			log.Info("Cluster's bearer token expires soon and its source has not given another", "expires", expiring.Expires.UTC())
			if ref != nil {
				k.warn(ref, ReasonCredentialsExpiring, err)
			}
			return
		}
		if silent := (*fleet.WatchSilentError)(nil); errors.As(err, &silent) {
			// Logged by the engine, with the cluster.
			if ref != nil {
				k.warn(ref, ReasonWatchSilent, err)
			}
			return
		}
		if refused := (*clusters.RefusedCredentialsError)(nil); errors.As(err, &refused) {
			// Logged by Members, with the cluster and the source.
			if ref != nil {
				k.warn(ref, ReasonCredentialsRefused, err)
			}
			return
		}
		if ref == nil {
			return // a listed inventory has no object to tell
		} else if err != nil {
			k.warn(ref, ReasonEngageFailed, redactErr(err, d.Sensitive))
			return
		}
		k.recorder.Eventf(ref, nil, corev1.EventTypeNormal, ReasonEngaged, "Engage", "Cluster %q engaged", d.Name)
	}, clusters.SetSource(source), clusters.SetPaused(d.Paused))
	switch {
	case !changed: // a change of something else, or a resync
	case replaced:
		log.Info("Cluster's configuration changed: the engine rebuilds it, or rotates its credentials in place")
	default:
		log.Info("Engaging cluster")
	}
}

// report turns Desire's error into an Event, once per change of obj for a
// terminal Problem; other errors are retried by the controller.
func (k *Kit[T]) report(log logr.Logger, obj T, err error) (reconcile.Result, error) {
	err = redactErr(err, nil)
	var p *Problem
	if !errors.As(err, &p) {
		return reconcile.Result{}, err
	}
	if !p.Terminal {
		k.warn(k.ref(obj), p.Reason, err)
		return reconcile.Result{}, err
	}
	version := fmt.Sprint(obj.GetGeneration())
	if obj.GetGeneration() == 0 {
		version = obj.GetResourceVersion()
	}
	if k.reportOnce(client.ObjectKeyFromObject(obj), version+"/"+p.Reason+"/"+err.Error()) {
		log.Error(err, "Source object not usable", "reason", p.Reason)
		k.warn(k.ref(obj), p.Reason, err)
	}
	return reconcile.Result{}, nil
}

// warn records err as a Warning Event on ref, its note bounded: the API
// server refuses a longer one.
func (k *Kit[T]) warn(ref client.Object, reason string, err error) {
	k.recorder.Eventf(ref, nil, corev1.EventTypeWarning, reason, "Engage", "%s", redact.Message(err.Error()))
}

// ClusterHealthCheck returns Options.HealthCheck, which the manager runs on
// every probe of the kit's clusters (mcmanager.ClusterHealthChecker).
func (k *Kit[T]) ClusterHealthCheck() func(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	return k.opts.HealthCheck
}

// Listed is closed once every object present when the kit's caches synced
// has been considered or, with a List, once the first listing has been
// published (multicluster.ListingProvider): the manager's readiness check
// waits for it.
func (k *Kit[T]) Listed() <-chan struct{} { return k.listed }
