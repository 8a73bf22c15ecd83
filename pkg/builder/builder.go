package builder

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mccontroller "github.com/mcruntime/multicluster-runtime/pkg/controller"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	mcsource "github.com/mcruntime/multicluster-runtime/pkg/source"
)

// Builder builds a multi-cluster controller.
type Builder = TypedBuilder[mcreconcile.Request]

// TypedBuilder builds a multi-cluster controller with its own request type
// (see mcreconcile.ClusterAware). For and Owns need mcreconcile.Request, as
// controller-runtime's For and Owns need reconcile.Request; Watches and
// WatchesRawSource take handlers and sources of the request type.
type TypedBuilder[request mcreconcile.ClusterAware[request]] struct {
	mgr              mcmanager.Manager
	name             string
	forObj           client.Object
	forInput         ForInput
	owns             []ownsWatch
	watches          []watchesWatch[request]
	rawSources       []mcsource.TypedSource[client.Object, request]
	globalPredicates []predicate.Predicate
	options          mccontroller.TypedOptions[request]
	notFoundWrapper  bool
	fairQueue        bool
	hostOwnerOnly    bool // see WithHostReconcilesOnHostOwner
	err              error
}

type ownsWatch struct {
	obj client.Object
	in  OwnsInput
}

type watchesWatch[request comparable] struct {
	obj     client.Object
	handler mchandler.TypedEventHandlerFunc[client.Object, request]
	in      WatchesInput
}

// ControllerManagedBy starts building a controller that mgr runs.
func ControllerManagedBy(mgr mcmanager.Manager) *Builder {
	return TypedControllerManagedBy[mcreconcile.Request](mgr)
}

// TypedControllerManagedBy starts building a controller with its own request
// type that mgr runs.
func TypedControllerManagedBy[request mcreconcile.ClusterAware[request]](mgr mcmanager.Manager) *TypedBuilder[request] {
	return &TypedBuilder[request]{mgr: mgr, notFoundWrapper: true, fairQueue: true}
}

// For sets the type the controller reconciles and watches it, enqueueing each
// object in its own cluster. It may be called once.
func (b *TypedBuilder[request]) For(obj client.Object, opts ...ForOption) *TypedBuilder[request] {
	if b.forObj != nil {
		b.err = errors.Join(b.err, errors.New("For(...) should only be called once, could not assign multiple objects for reconciliation"))
		return b
	}
	b.forObj = obj
	for _, o := range opts {
		o.ApplyToFor(&b.forInput)
	}
	return b
}

// Owns watches obj and enqueues its controller owner of the For type, in the
// cluster of the owned object.
func (b *TypedBuilder[request]) Owns(obj client.Object, opts ...OwnsOption) *TypedBuilder[request] {
	w := ownsWatch{obj: obj}
	for _, o := range opts {
		o.ApplyToOwns(&w.in)
	}
	b.owns = append(b.owns, w)
	return b
}

// Watches watches obj with a per-cluster handler, e.g.
// mchandler.EnqueueRequestsFromMapFunc or mchandler.Lift(h).
func (b *TypedBuilder[request]) Watches(obj client.Object, h mchandler.TypedEventHandlerFunc[client.Object, request], opts ...WatchesOption) *TypedBuilder[request] {
	w := watchesWatch[request]{obj: obj, handler: h}
	for _, o := range opts {
		o.ApplyToWatches(&w.in)
	}
	b.watches = append(b.watches, w)
	return b
}

// WatchesMetadata is Watches on the objects' metadata only.
func (b *TypedBuilder[request]) WatchesMetadata(obj client.Object, h mchandler.TypedEventHandlerFunc[client.Object, request], opts ...WatchesOption) *TypedBuilder[request] {
	return b.Watches(obj, h, append(opts, OnlyMetadata)...)
}

// WatchesRawSource adds a multi-cluster source as it is: engage options and
// event filters do not apply to it.
func (b *TypedBuilder[request]) WatchesRawSource(src mcsource.TypedSource[client.Object, request]) *TypedBuilder[request] {
	b.rawSources = append(b.rawSources, src)
	return b
}

// WithEventFilter adds a predicate to every For, Owns and Watches watch.
func (b *TypedBuilder[request]) WithEventFilter(p predicate.Predicate) *TypedBuilder[request] {
	b.globalPredicates = append(b.globalPredicates, p)
	return b
}

// WithOptions sets the controller's options.
func (b *TypedBuilder[request]) WithOptions(options mccontroller.TypedOptions[request]) *TypedBuilder[request] {
	b.options = options
	return b
}

// WithLogConstructor sets how the controller builds a request's logger.
func (b *TypedBuilder[request]) WithLogConstructor(fn func(*request) logr.Logger) *TypedBuilder[request] {
	b.options.LogConstructor = fn
	return b
}

// WithClusterNotFoundWrapper chooses whether errors wrapping
// multicluster.ErrClusterNotFound end a request without requeue (the default).
func (b *TypedBuilder[request]) WithClusterNotFoundWrapper(wrap bool) *TypedBuilder[request] {
	b.notFoundWrapper = wrap
	return b
}

// WithFairQueue chooses whether the controller's queue serves the clusters
// with work in turn (the default, see mccontroller.FairQueue) or in the order
// requests come, as controller-runtime's default queue does. A NewQueue set
// through WithOptions takes precedence. Without the fair queue, nothing keeps
// one cluster to its share of workers, so MaxConcurrentReconciles defaults to
// controller-runtime's 1 rather than mccontroller.DefaultMaxConcurrentReconciles.
func (b *TypedBuilder[request]) WithFairQueue(fair bool) *TypedBuilder[request] {
	b.fairQueue = fair
	return b
}

// Named sets the controller's name, which must be unique. Defaults to the
// lower-cased kind of the For type.
func (b *TypedBuilder[request]) Named(name string) *TypedBuilder[request] {
	b.name = name
	return b
}

// Complete builds the controller and adds it to the manager.
func (b *TypedBuilder[request]) Complete(r reconcile.TypedReconciler[request]) error {
	_, err := b.Build(r)
	return err
}

// Build builds the controller, adds it to the manager and returns it.
func (b *TypedBuilder[request]) Build(r reconcile.TypedReconciler[request]) (mccontroller.TypedController[request], error) {
	if b.err != nil {
		return nil, b.err
	}
	if b.mgr == nil {
		return nil, errors.New("must provide a non-nil Manager")
	}
	if r == nil && b.options.Reconciler == nil {
		return nil, errors.New("must provide a non-nil Reconciler")
	}
	if r != nil && b.options.Reconciler != nil {
		return nil, errors.New("reconciler was set via WithOptions() and via Build() or Complete()")
	}
	if len(b.owns) > 0 && b.forObj == nil {
		return nil, errors.New("Owns() can only be used together with For()")
	}
	if b.forObj == nil && len(b.watches) == 0 && len(b.rawSources) == 0 {
		return nil, errors.New("there are no watches configured, controller will never get triggered. Use For(), Owns(), Watches() or WatchesRawSource() to set them up")
	}
	if _, ok := any(*new(request)).(mcreconcile.Request); !ok && b.forObj != nil {
		return nil, fmt.Errorf("For() can only be used with mcreconcile.Request, got %T", *new(request))
	}

	if err := b.checkOtherProviders(); err != nil {
		return nil, err
	}

	options := b.options
	if options.Reconciler == nil {
		options.Reconciler = r
	}
	if b.notFoundWrapper {
		options.Reconciler = mcreconcile.NewClusterNotFoundWrapper(options.Reconciler)
	}

	scheme := b.mgr.GetLocalManager().GetScheme()
	var gvk schema.GroupVersionKind
	if b.forObj != nil {
		var err error
		if gvk, err = apiutil.GVKForObject(b.forObj, scheme); err != nil {
			return nil, err // controller-runtime's words, as its builder returns them
		}
	}
	name := b.name
	if name == "" {
		if b.forObj == nil {
			return nil, errors.New("one of For() or Named() must be called")
		}
		name = strings.ToLower(gvk.Kind)
	}
	global := b.mgr.GetControllerOptions()
	if options.MaxConcurrentReconciles == 0 && b.forObj != nil {
		if n := global.GroupKindConcurrency[gvk.GroupKind().String()]; n > 0 {
			options.MaxConcurrentReconciles = n
		}
	}
	if options.LogConstructor == nil {
		options.LogConstructor = b.logConstructor(name, gvk)
	}

	if !b.fairQueue && options.NewQueue == nil {
		options.DefaultFromConfig(global)
		options.NewQueue = mccontroller.PlainQueue(options)
	}

	ctrl, err := b.newController(name, options)
	if err != nil {
		return nil, err
	}
	if err := b.watch(ctrl, name); err != nil {
		return nil, err
	}
	if err := b.runOtherProviders(ctrl); err != nil {
		return nil, err
	}
	return ctrl, nil
}

// watch adds the builder's watches to ctrl, the controller named name. An
// object it cannot watch is refused in controller-runtime's words, as its
// builder does; a watch that fails in a cluster is this project's own error,
// and says which controller.
func (b *TypedBuilder[request]) watch(ctrl mccontroller.TypedController[request], name string) error {
	failed := func(err error) error { return fmt.Errorf("mcbuilder: controller %q: %w", name, err) }
	if b.forObj != nil {
		obj, err := b.project(b.forObj, b.forInput.metadataOnly)
		if err != nil {
			return err
		}
		if err := b.add(ctrl, obj, forRequest[request](mchandler.EnqueueRequestForObject), b.forInput.watchInput); err != nil {
			return failed(err)
		}
	}
	for _, w := range b.owns {
		obj, err := b.project(w.obj, w.in.metadataOnly)
		if err != nil {
			return err
		}
		var opts []handler.OwnerOption
		if !w.in.matchEveryOwner {
			opts = append(opts, handler.OnlyControllerOwner())
		}
		if err := b.add(ctrl, obj, forRequest[request](mchandler.EnqueueRequestForOwner(b.forObj, opts...)), w.in.watchInput); err != nil {
			return failed(err)
		}
	}
	for _, w := range b.watches {
		obj, err := b.project(w.obj, w.in.metadataOnly)
		if err != nil {
			return err
		}
		if err := b.add(ctrl, obj, w.handler, w.in.watchInput); err != nil {
			return failed(err)
		}
	}
	for _, src := range b.rawSources {
		if err := ctrl.MultiClusterWatch(src); err != nil {
			return failed(err)
		}
	}
	return nil
}

// forRequest is h, for a builder whose request type is mcreconcile.Request
// (Build checked that it is).
func forRequest[request comparable](h mchandler.EventHandlerFunc) mchandler.TypedEventHandlerFunc[client.Object, request] {
	return any(h).(mchandler.TypedEventHandlerFunc[client.Object, request])
}

func (b *TypedBuilder[request]) add(ctrl mccontroller.TypedController[request], obj client.Object, h mchandler.TypedEventHandlerFunc[client.Object, request], in watchInput) error {
	preds := append(append([]predicate.Predicate(nil), b.globalPredicates...), in.predicates...)
	src := mcsource.WithEngageOptions(mcsource.TypedKind(obj, h, preds...), b.engageOptions(in.engage))
	return ctrl.MultiClusterWatch(src)
}

// engageOptions resolves a watch's engage options: by default the provider's
// clusters when there is a provider, the host cluster when there is not.
func (b *TypedBuilder[request]) engageOptions(in engageInput) mcsource.EngageOptions {
	hasProvider := b.mgr.GetProvider() != nil
	opts := mcsource.EngageOptions{LocalCluster: !hasProvider, ProviderClusters: hasProvider, Filter: withOrigin(in.from, in.filter)}
	if in.from != nil {
		opts.LocalCluster, opts.ProviderClusters = false, true
	}
	if in.local != nil {
		opts.LocalCluster = *in.local
	}
	if in.provider != nil {
		opts.ProviderClusters = *in.provider
	}
	return opts
}

func (b *TypedBuilder[request]) project(obj client.Object, metadataOnly bool) (client.Object, error) {
	if !metadataOnly {
		return obj, nil
	}
	gvk, err := apiutil.GVKForObject(obj, b.mgr.GetLocalManager().GetScheme())
	if err != nil {
		return nil, fmt.Errorf("unable to determine GVK of %T for a metadata-only watch: %w", obj, err)
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(gvk)
	return meta, nil
}

// logConstructor adds the controller, its kind, and the request's cluster,
// namespace and name to the logger.
func (b *TypedBuilder[request]) logConstructor(name string, gvk schema.GroupVersionKind) func(*request) logr.Logger {
	return requestLogger[request](b.mgr.GetLogger(), name, gvk)
}

// requestLogger returns the log constructor of a controller named name whose
// kind is gvk (none for a controller built without For): base with the
// controller and its kind, and, for each request, its cluster, namespace and
// name (or, for a request of another type, its cluster and its String).
//
// It runs for every reconcile, so it pays nothing controller-runtime's own
// does not: the request is asserted by pointer (as an interface value it
// would be copied to the heap), and a discarded logger (no sink) is returned
// as it is, before the key/values that nothing would read are boxed.
func requestLogger[request mcreconcile.ClusterAware[request]](base logr.Logger, name string, gvk schema.GroupVersionKind) func(*request) logr.Logger {
	log := base.WithValues("controller", name)
	if gvk.Kind != "" {
		log = log.WithValues("controllerGroup", gvk.Group, "controllerKind", gvk.Kind)
	}
	return func(in *request) logr.Logger {
		if in == nil || log.GetSink() == nil {
			return log
		}
		req, ok := any(in).(*mcreconcile.Request)
		if !ok {
			return log.WithValues("cluster", (*in).Cluster(), "request", fmt.Sprint(*in))
		}
		if gvk.Kind != "" {
			return log.WithValues("cluster", req.ClusterName, gvk.Kind, klog.KRef(req.Namespace, req.Name),
				"namespace", req.Namespace, "name", req.Name)
		}
		return log.WithValues("cluster", req.ClusterName, "namespace", req.Namespace, "name", req.Name)
	}
}
