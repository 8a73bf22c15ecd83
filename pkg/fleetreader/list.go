package fleetreader

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// ClusterAnnotation is set on every object Reader.List returns, to the name
// of the cluster it came from. The annotation is set on the returned copy;
// the caches' objects are never changed. The generic List returns the
// cluster beside each object instead.
const ClusterAnnotation = "multicluster.mcruntime.github.io/cluster"

// Entry is an object and the cluster it came from.
type Entry[T client.Object] struct {
	Cluster multicluster.ClusterName
	Object  T
}

// ClusterFilter is a list option that restricts a fleet read to the clusters
// it accepts, e.g. the members of a ClusterSet. Several filters must all
// accept a cluster.
type ClusterFilter func(name multicluster.ClusterName, cl cluster.Cluster) bool

// ApplyToList does nothing: the Reader applies cluster filters itself.
func (ClusterFilter) ApplyToList(*client.ListOptions) {}

// InClusters restricts a fleet read to the named clusters.
func InClusters(names ...multicluster.ClusterName) ClusterFilter {
	set := make(map[multicluster.ClusterName]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return func(name multicluster.ClusterName, _ cluster.Cluster) bool { return set[name] }
}

// listRequest is a List's options, split into the Reader's and the caches'.
type listRequest struct {
	filters []ClusterFilter
	cache   []client.ListOption // every option but the cluster filters
	opts    client.ListOptions
}

func parseListOptions(opts []client.ListOption) (*listRequest, error) {
	req := &listRequest{}
	for _, o := range opts {
		if f, ok := o.(ClusterFilter); ok {
			req.filters = append(req.filters, f)
			continue
		}
		req.cache = append(req.cache, o)
	}
	req.opts.ApplyOptions(req.cache)
	if req.opts.Continue != "" {
		return nil, errors.New("fleetreader: continue tokens are not supported: a fleet read is not paginated across clusters")
	}
	return req, nil
}

func (q *listRequest) accepts(m *member) bool {
	for _, f := range q.filters {
		if !f(m.name, m.cl) {
			return false
		}
	}
	return true
}

// visit calls fn with every object of type k that the request selects, in
// cluster order, until fn returns false or the limit is reached. Objects
// from the caches' List are fresh copies; those from a fleet index are
// copied here.
func (r *Reader) visit(ctx context.Context, k typeKey, newList func() (client.ObjectList, error), q *listRequest, fn func(m *member, obj runtime.Object)) error {
	limit := q.opts.Limit
	n := int64(0)
	if idx, value, ok := r.indexFor(k, q.opts.FieldSelector); ok {
		for _, h := range idx.lookup(value) {
			if limit > 0 && n >= limit {
				break
			}
			if !r.current(h.m) || !q.accepts(h.m) || !selects(&q.opts, h.obj) {
				continue
			}
			fn(h.m, h.obj.DeepCopyObject())
			n++
		}
		return nil
	}
	var errs []error
	for _, m := range *r.engaged.Load() {
		if limit > 0 && n >= limit {
			break
		}
		if !m.live() || !q.accepts(m) {
			continue
		}
		inf := r.readable(m, k)
		if inf == nil {
			continue
		}
		if store := directStore(inf, &q.opts); store != nil {
			if err := visitStore(store, k, q, limit, &n, func(obj runtime.Object) { fn(m, obj) }); err != nil {
				errs = append(errs, fmt.Errorf("cluster %q: %w", m.name, err))
			}
			continue
		}
		list, err := newList()
		if err != nil {
			return err
		}
		opts := q.cache
		if limit > 0 {
			opts = append(slices.Clip(opts), client.Limit(limit-n))
		}
		if err := m.cl.GetCache().List(ctx, list, opts...); err != nil {
			if ctx.Err() != nil {
				return err
			}
			// One cluster's failure does not hide the others' objects.
			errs = append(errs, fmt.Errorf("cluster %q: %w", m.name, err))
			continue
		}
		if err := meta.EachListItem(list, func(obj runtime.Object) error {
			fn(m, obj)
			n++
			return nil
		}); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

// current reports whether m is the engagement read now under its name: while
// a cluster is replaced by a new engagement of the same name, the entries of
// the old one are not read beside the new one's.
func (r *Reader) current(m *member) bool {
	ms := *r.engaged.Load()
	i, found := slices.BinarySearchFunc(ms, m.name, func(e *member, name string) int { return strings.Compare(e.name, name) })
	return found && ms[i] == m && m.live()
}

// directStore returns the store of a cluster's informer when a list can
// read it directly, as the cluster's cache would: the informer is
// client-go's shared index informer itself (a cache that filters its
// informers, such as the namespace provider's views or a multi-namespace
// cache, returns wrappers, which are read through the cache's List), and no
// field selector asks for a per-cluster index. Reading the store saves the
// cache's conversion of every item into a typed list and back.
func directStore(inf cache.Informer, opts *client.ListOptions) toolscache.Indexer {
	if opts.FieldSelector != nil && !opts.FieldSelector.Empty() {
		return nil
	}
	if sii, ok := inf.(toolscache.SharedIndexInformer); ok {
		return sii.GetIndexer()
	}
	return nil
}

// visitStore lists a cluster's store as controller-runtime's cache reader
// does: by namespace index, label selector, deep copies with their kind set.
func visitStore(store toolscache.Indexer, k typeKey, q *listRequest, limit int64, n *int64, fn func(runtime.Object)) error {
	var items []any
	if ns := q.opts.Namespace; ns != "" {
		var err error
		if items, err = store.ByIndex(toolscache.NamespaceIndex, ns); err != nil {
			return err
		}
	} else {
		items = store.List()
	}
	for _, item := range items {
		if limit > 0 && *n >= limit {
			return nil
		}
		o, ok := item.(client.Object)
		if !ok {
			return fmt.Errorf("cache contained %T, which is not an object", item)
		}
		if q.opts.LabelSelector != nil && !q.opts.LabelSelector.Matches(labelSet(o.GetLabels())) {
			continue
		}
		out := o.DeepCopyObject()
		out.GetObjectKind().SetGroupVersionKind(k.gvk)
		fn(out)
		*n++
	}
	return nil
}

// selects applies the namespace and label selector of opts to an object of
// a fleet index (whose field selector the index answered).
func selects(opts *client.ListOptions, obj runtime.Object) bool {
	o, ok := obj.(client.Object)
	if !ok {
		return false
	}
	if opts.Namespace != "" && o.GetNamespace() != opts.Namespace {
		return false
	}
	if opts.LabelSelector != nil && !opts.LabelSelector.Matches(labelSet(o.GetLabels())) {
		return false
	}
	return true
}

type labelSet map[string]string

func (l labelSet) Has(k string) bool   { _, ok := l[k]; return ok }
func (l labelSet) Get(k string) string { return l[k] }
func (l labelSet) Lookup(k string) (string, bool) {
	v, ok := l[k]
	return v, ok
}

// indexFor returns the fleet index that answers a field selector: one
// requirement, an exact match on a field with a fleet index.
func (r *Reader) indexFor(k typeKey, sel fields.Selector) (*index, string, bool) {
	if sel == nil || sel.Empty() {
		return nil, "", false
	}
	reqs := sel.Requirements()
	if len(reqs) != 1 || (reqs[0].Operator != selection.Equals && reqs[0].Operator != selection.DoubleEquals) {
		return nil, "", false
	}
	r.mu.Lock()
	idx := r.indexes[indexKey{t: k, field: reqs[0].Field}]
	r.mu.Unlock()
	return idx, reqs[0].Value, idx != nil
}

// List reads the objects of list's item type from every engaged cluster (or
// those the ClusterFilter options accept) and stores copies in list, each
// annotated with ClusterAnnotation. Options are those of a cache List:
// namespace, label and field selectors (MatchingFields on a field indexed
// with IndexField is answered by the fleet index; on other fields, by each
// cluster's own index), and Limit, a limit on the total. Continue is not
// supported. A cluster whose cache fails the list is named in the error; the
// objects of the others are still returned.
func (r *Reader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	k, err := r.declared(list)
	if err != nil {
		return err
	}
	q, err := parseListOptions(opts)
	if err != nil {
		return err
	}
	newList := func() (client.ObjectList, error) {
		return list.DeepCopyObject().(client.ObjectList), nil
	}
	var items []runtime.Object
	err = r.visit(ctx, k, newList, q, func(m *member, obj runtime.Object) {
		if o, ok := obj.(client.Object); ok {
			a := o.GetAnnotations()
			if a == nil {
				a = make(map[string]string, 1)
			}
			a[ClusterAnnotation] = m.name
			o.SetAnnotations(a)
		}
		items = append(items, obj)
	})
	if setErr := meta.SetList(list, items); setErr != nil {
		return errors.Join(err, setErr)
	}
	return err
}

// List reads the objects of type T across the fleet, each with the cluster
// it came from, in the order of cluster names (within a cluster, in the
// cache's order; answers of a fleet index are sorted by key). Options as for
// Reader.List. T is a pointer
// to a typed object (*appsv1.Deployment); for unstructured or metadata-only
// reads, use Reader.List with an UnstructuredList or PartialObjectMetadataList,
// which carry their kind.
func List[T client.Object](ctx context.Context, r *Reader, opts ...client.ListOption) ([]Entry[T], error) {
	proto, err := newObject[T]()
	if err != nil {
		return nil, err
	}
	k, err := r.declared(proto)
	if err != nil {
		return nil, err
	}
	q, err := parseListOptions(opts)
	if err != nil {
		return nil, err
	}
	listGVK := k.gvk
	listGVK.Kind += "List"
	newList := func() (client.ObjectList, error) {
		obj, err := r.scheme.New(listGVK)
		if err != nil {
			return nil, fmt.Errorf("fleetreader: list type of %s: %w", k, err)
		}
		list, ok := obj.(client.ObjectList)
		if !ok {
			return nil, fmt.Errorf("fleetreader: %T is not a list", obj)
		}
		return list, nil
	}
	var out []Entry[T]
	err = r.visit(ctx, k, newList, q, func(m *member, obj runtime.Object) {
		if t, ok := obj.(T); ok {
			out = append(out, Entry[T]{Cluster: m.name, Object: t})
		}
	})
	return out, err
}

// newObject returns a new T, which must be a pointer to a typed object.
func newObject[T client.Object]() (T, error) {
	var zero T
	t := reflect.TypeOf(zero)
	if t == nil || t.Kind() != reflect.Pointer {
		return zero, fmt.Errorf("fleetreader: List[%T]: the type parameter must be a pointer to an object type", zero)
	}
	obj, _ := reflect.New(t.Elem()).Interface().(T)
	switch any(obj).(type) {
	case *unstructured.Unstructured, *metav1.PartialObjectMetadata:
		return zero, fmt.Errorf("fleetreader: List[%T] does not know the kind: use Reader.List with a list that carries it", zero)
	}
	return obj, nil
}
