package fleetreader

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type indexKey struct {
	t     typeKey
	field string
}

// index is a fleet-wide inverted index of one field of one type: value →
// the objects of every engaged cluster that have it. It is fed by an event
// handler on each cluster's informer, so a lookup costs O(matches) whatever
// the number of clusters. Objects are the informers' own (shared, never
// changed); reads copy them.
type index struct {
	key     indexKey
	extract client.IndexerFunc

	mu       sync.RWMutex
	byValue  map[string]map[ref]client.Object
	byMember map[*member]map[string][]string // object key → its values; nil once detached
}

type ref struct {
	m   *member
	key string // namespace/name
}

type hit struct {
	m   *member
	key string
	obj client.Object
}

// IndexField indexes obj's type by field across the fleet: every engaged
// cluster, now and later, feeds one inverted index from its informer (the
// type is declared as with Informer). A List with
// client.MatchingFields{field: value} (alone in the field selector) then
// costs O(matches), not one lookup per cluster. extract returns the values
// of an object, as for controller-runtime's IndexField; the index is the
// Reader's own, so the same field may also be indexed per cluster with the
// manager's field indexer. Indexing a field twice is an error.
func (r *Reader) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	if extract == nil {
		return fmt.Errorf("fleetreader: indexing %T by %q: nil extract function", obj, field)
	}
	k, err := r.keyOf(obj)
	if err != nil {
		return err
	}
	r.declare(k, obj)
	ik := indexKey{t: k, field: field}
	idx := &index{key: ik, extract: extract, byValue: map[string]map[ref]client.Object{}, byMember: map[*member]map[string][]string{}}
	r.mu.Lock()
	if _, ok := r.indexes[ik]; ok {
		r.mu.Unlock()
		return fmt.Errorf("fleetreader: %s is already indexed by %q", k, field)
	}
	r.indexes[ik] = idx
	r.mu.Unlock()
	for _, m := range *r.engaged.Load() {
		r.attach(m, idx)
	}
	return nil
}

// attach feeds idx from m's informer until m's engagement ends, then drops
// m's entries.
func (r *Reader) attach(m *member, idx *index) {
	m.mu.Lock()
	if m.attached[idx] {
		m.mu.Unlock()
		return
	}
	if m.attached == nil {
		m.attached = map[*index]bool{}
	}
	m.attached[idx] = true
	m.mu.Unlock()
	inf, err := r.informer(m, idx.key.t, r.prototype(idx.key.t, nil))
	if err != nil {
		return // logged
	}
	idx.mu.Lock()
	idx.byMember[m] = map[string][]string{}
	idx.mu.Unlock()
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { idx.set(m, obj) },
		UpdateFunc: func(_, obj any) { idx.set(m, obj) },
		DeleteFunc: func(obj any) { idx.remove(m, obj) },
	})
	if err != nil {
		r.log.Error(err, "Cluster left out of a fleet index", "cluster", m.name, "type", idx.key.t.String(), "field", idx.key.field)
		idx.detach(m)
		return
	}
	context.AfterFunc(m.ctx, func() {
		_ = inf.RemoveEventHandler(reg)
		idx.detach(m)
	})
}

func objectKey(obj client.Object) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}

func (idx *index) set(m *member, o any) {
	obj, ok := o.(client.Object)
	if !ok {
		return
	}
	key := objectKey(obj)
	values := idx.extract(obj)
	idx.mu.Lock()
	defer idx.mu.Unlock()
	objs := idx.byMember[m]
	if objs == nil {
		return // detached: a late event
	}
	r := ref{m: m, key: key}
	for _, v := range objs[key] {
		if !slices.Contains(values, v) {
			idx.drop(v, r)
		}
	}
	for _, v := range values {
		set := idx.byValue[v]
		if set == nil {
			set = map[ref]client.Object{}
			idx.byValue[v] = set
		}
		set[r] = obj
	}
	if len(values) == 0 {
		delete(objs, key)
	} else {
		objs[key] = slices.Clone(values)
	}
}

func (idx *index) remove(m *member, o any) {
	if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = tomb.Obj
	}
	obj, ok := o.(client.Object)
	if !ok {
		return
	}
	key := objectKey(obj)
	idx.mu.Lock()
	defer idx.mu.Unlock()
	objs := idx.byMember[m]
	if objs == nil {
		return
	}
	for _, v := range objs[key] {
		idx.drop(v, ref{m: m, key: key})
	}
	delete(objs, key)
}

// drop removes one entry. Callers hold idx.mu.
func (idx *index) drop(value string, r ref) {
	set := idx.byValue[value]
	delete(set, r)
	if len(set) == 0 {
		delete(idx.byValue, value)
	}
}

// detach removes every entry of m.
func (idx *index) detach(m *member) {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	for key, values := range idx.byMember[m] {
		for _, v := range values {
			idx.drop(v, ref{m: m, key: key})
		}
	}
	delete(idx.byMember, m)
}

// lookup returns the objects of live members indexed under value, sorted by
// cluster and key.
func (idx *index) lookup(value string) []hit {
	idx.mu.RLock()
	set := idx.byValue[value]
	hits := make([]hit, 0, len(set))
	for r, obj := range set {
		if r.m.live() {
			hits = append(hits, hit{m: r.m, key: r.key, obj: obj})
		}
	}
	idx.mu.RUnlock()
	slices.SortFunc(hits, func(a, b hit) int {
		if c := strings.Compare(a.m.name, b.m.name); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	return hits
}
