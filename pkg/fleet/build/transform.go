package build

import (
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// LastAppliedAnnotation is the annotation kubectl's client-side apply keeps
// the last applied configuration in: a copy of the whole object as JSON.
const LastAppliedAnnotation = corev1.LastAppliedConfigAnnotation

// TransformStripFieldManagement returns a cache transform that drops what the
// API server and kubectl record about who wrote an object, before the object
// is stored: metadata.managedFields and the LastAppliedAnnotation. Both are
// bookkeeping of writers, read by the API server (server-side apply) and
// kubectl (client-side apply) from the stored object, never from a
// controller's cache; on a small object written with server-side apply they
// are often a third to a half of what the cache holds.
//
// NewCluster installs it in every cluster it builds unless KeepManagedFields
// is given. It is exported for caches NewCluster does not build, such as the
// shared cluster of the namespace provider:
//
//	cluster.New(cfg, func(o *cluster.Options) { o.Cache.DefaultTransform = clusters.TransformStripFieldManagement() })
func TransformStripFieldManagement() toolscache.TransformFunc { return stripFieldManagement }

// stripFieldManagement is TransformStripFieldManagement's transform. It edits
// the object in place, as controller-runtime's TransformStripManagedFields
// does: the informer hands over an object it decoded for itself.
func stripFieldManagement(in any) (any, error) {
	switch obj := in.(type) {
	case *unstructured.Unstructured:
		// GetAnnotations would copy the map to look at one key.
		if md, ok := obj.Object["metadata"].(map[string]any); ok {
			delete(md, "managedFields")
			if a, ok := md["annotations"].(map[string]any); ok {
				if _, found := a[LastAppliedAnnotation]; found {
					delete(a, LastAppliedAnnotation)
					if len(a) == 0 {
						delete(md, "annotations")
					}
				}
			}
		}
	case metav1.Object:
		// Set only when set: a typed object's empty list and nil differ in
		// nothing but a write, and writing nil costs a call for nothing.
		if obj.GetManagedFields() != nil {
			obj.SetManagedFields(nil)
		}
		if a := obj.GetAnnotations(); a != nil {
			if _, found := a[LastAppliedAnnotation]; found {
				delete(a, LastAppliedAnnotation)
				if len(a) == 0 {
					obj.SetAnnotations(nil)
				}
			}
		}
	}
	return in, nil
}

// building holds, while NewCluster applies a call's options, what options
// of this package asked of it that cluster.Options has no field for
// (KeepManagedFields, WithResponseCompression): a cluster.Option can only
// edit cluster.Options.
var building sync.Map // *cluster.Options -> *buildFlags

// buildFlags are what a call's options asked of NewCluster beyond
// cluster.Options.
type buildFlags struct {
	keepManagedFields bool
	compression       bool
	internStrings     bool
}

// setFlag returns a cluster option that sets one of NewCluster's flags; under
// other builders of clusters it does nothing, there being nothing to set.
func setFlag(set func(*buildFlags)) cluster.Option {
	return func(o *cluster.Options) {
		if f, ok := building.Load(o); ok {
			set(f.(*buildFlags))
		}
	}
}

// KeepManagedFields is a cluster option that keeps metadata.managedFields and
// the LastAppliedAnnotation in the cache of a cluster NewCluster builds, for
// controllers that read field ownership or kubectl's last applied
// configuration from cached objects. Give it per cluster (to NewCluster),
// per provider (in a provider's ClusterOptions) or per manager
// (mcmanager.WithClusterOptions). Other builders of clusters, cluster.New
// among them, keep both anyway: there it changes nothing.
func KeepManagedFields() cluster.Option {
	return setFlag(func(f *buildFlags) { f.keepManagedFields = true })
}

// WithInternedStrings is a cluster option that makes a cluster NewCluster
// builds share the short strings of what it caches with equal strings of
// objects cached before, in any cluster of the process
// (TransformInternStrings), after the strip of field management.
//
// It is off by default: it pays only where members cache the same objects
// (many cluster names over one server, or copies of one configuration). On a
// simulated fleet whose members differ (bench/fleetsim, 300 members x 250
// objects, docs/advanced/performance.md) it saved no heap and cost CPU at
// every sync and event. Give it to a provider (its ClusterOptions) or a
// manager (mcmanager.WithClusterOptions) whose members hold largely
// identical objects. Other builders of clusters ignore it.
func WithInternedStrings() cluster.Option {
	return setFlag(func(f *buildFlags) { f.internStrings = true })
}

// applyOptions applies opts to o and returns what options of this package
// asked beyond cluster.Options.
func applyOptions(o *cluster.Options, opts []cluster.Option) buildFlags {
	var f buildFlags
	building.Store(o, &f)
	defer building.Delete(o)
	for _, opt := range opts {
		opt(o)
	}
	return f
}

// memberTransform is what NewCluster runs first on every object it caches:
// the strip of field management unless KeepManagedFields was given, then,
// with WithInternedStrings, the interning of strings. Nil: nothing to run.
func memberTransform(f buildFlags) toolscache.TransformFunc {
	switch {
	case f.keepManagedFields && f.internStrings:
		return internStrings
	case f.keepManagedFields:
		return nil
	case f.internStrings:
		return then(stripFieldManagement, internStrings)
	default:
		return stripFieldManagement
	}
}

// transformFirst returns opts with first run before every transform they
// name: the default one, each type's and each namespace's (a type's or a
// namespace's own transform replaces the default in controller-runtime's
// cache, so each gets first in front). A transform of the user's therefore
// sees objects already stripped. The maps are copied: options shared by
// every cluster of a provider hold one map.
func transformFirst(opts cache.Options, first toolscache.TransformFunc) cache.Options {
	opts.DefaultTransform = then(first, opts.DefaultTransform)
	opts.DefaultNamespaces = transformConfigs(opts.DefaultNamespaces, first)
	if opts.ByObject != nil {
		byObject := maps.Clone(opts.ByObject)
		for obj, by := range byObject {
			if by.Transform != nil {
				by.Transform = then(first, by.Transform)
			}
			by.Namespaces = transformConfigs(by.Namespaces, first)
			byObject[obj] = by
		}
		opts.ByObject = byObject
	}
	return opts
}

// transformConfigs puts first in front of each config's own transform; a
// config without one inherits the default, which has it.
func transformConfigs(in map[string]cache.Config, first toolscache.TransformFunc) map[string]cache.Config {
	if in == nil {
		return nil
	}
	out := maps.Clone(in)
	for ns, c := range out {
		if c.Transform != nil {
			c.Transform = then(first, c.Transform)
			out[ns] = c
		}
	}
	return out
}

// then is first followed by next, if any.
func then(first, next toolscache.TransformFunc) toolscache.TransformFunc {
	if next == nil {
		return first
	}
	return func(in any) (any, error) {
		out, err := first(in)
		if err != nil {
			return nil, err
		}
		return next(out)
	}
}
