package build

import (
	"hash/maphash"
	"reflect"
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
)

// TransformInternStrings returns a cache transform that makes the short
// strings of an object share their memory with equal strings of objects
// cached before it, in any cluster of the process: namespaces, label and
// annotation keys and values, a ConfigMap's keys, a container's image and
// environment, the names a fleet's clusters have in common. Decoding gives
// every object its own copy of each of them; across a fleet of similar
// members they are most of what an object holds besides its maps.
//
// Go strings cannot be changed, so sharing one is invisible to a reader of
// the object. What it leaves alone: strings longer than 128 bytes (large
// values seldom repeat, and the table must not keep one alive after its
// object is gone), byte slices, unexported fields, and the fields that never
// repeat (UID, ResourceVersion). The table of shared strings is bounded
// (internShards × internShardSize strings, a shard forgotten when full), so
// a fleet of unique strings costs CPU, never unbounded memory.
//
// NewCluster installs it in a cluster built with WithInternedStrings, after
// the strip of field management (TransformStripFieldManagement) and before
// any transform of its options; it is not a default, as it pays only where
// members cache the same objects.
func TransformInternStrings() toolscache.TransformFunc { return internStrings }

func internStrings(in any) (any, error) {
	switch obj := in.(type) {
	case interface{ UnstructuredContent() map[string]any }:
		internJSONMap(obj.UnstructuredContent())
	default:
		v := reflect.ValueOf(in)
		if v.Kind() == reflect.Pointer && !v.IsNil() && holdsStrings(v.Type().Elem()) {
			internValue(v.Elem())
		}
	}
	return in, nil
}

const (
	internMaxLen    = 128
	internShards    = 64   // a power of two: shards spread the lock of thousands of informers
	internShardSize = 2048 // strings per shard before it is forgotten
)

// interned is the process's table of shared strings.
var interned = func() *internTable {
	t := &internTable{seed: maphash.MakeSeed()}
	for i := range t.shards {
		t.shards[i].m = make(map[string]string)
	}
	return t
}()

type internTable struct {
	seed   maphash.Seed
	shards [internShards]struct {
		mu sync.Mutex
		m  map[string]string
		_  [40]byte // a cache line per shard: the locks of neighbours do not share one
	}
}

// intern returns the table's copy of s, making s the copy if there is none.
func intern(s string) string {
	if len(s) == 0 || len(s) > internMaxLen {
		return s
	}
	sh := &interned.shards[maphash.String(interned.seed, s)&(internShards-1)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c, ok := sh.m[s]; ok {
		return c
	}
	if len(sh.m) >= internShardSize {
		// Forgotten, not evicted one by one: the strings stay where objects
		// use them, and the next ones are shared from here on.
		sh.m = make(map[string]string, internShardSize/4)
	}
	sh.m[s] = s
	return s
}

// internJSONMap interns the keys and string values of an unstructured
// object, in place.
func internJSONMap(m map[string]any) {
	for k, v := range m {
		// An assignment to a key present replaces the stored key with the
		// one assigned: the map then holds the shared copy.
		m[intern(k)] = internJSON(v)
	}
}

func internJSON(v any) any {
	switch v := v.(type) {
	case string:
		return intern(v)
	case map[string]any:
		internJSONMap(v)
	case []any:
		for i := range v {
			v[i] = internJSON(v[i])
		}
	}
	return v
}

// neverRepeats names the fields of API types whose values are unique to an
// object or a version of it: the table would only churn with them.
var neverRepeats = map[string]bool{"UID": true, "ResourceVersion": true}

// internValue interns the strings reachable from v (addressable) through
// exported fields, pointers, slices and maps. Callers only call it for
// values whose type holdsStrings.
func internValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			if s := v.String(); len(s) <= internMaxLen {
				v.SetString(intern(s))
			}
		}
	case reflect.Pointer:
		if !v.IsNil() {
			internValue(v.Elem())
		}
	case reflect.Struct:
		for _, i := range fieldsWithStrings(v.Type()) {
			internValue(v.Field(i))
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			internValue(v.Index(i))
		}
	case reflect.Map:
		internMap(v)
	case reflect.Interface:
		if !v.IsNil() && v.CanSet() && holdsStrings(v.Elem().Type()) {
			e := v.Elem()
			c := reflect.New(e.Type()).Elem()
			c.Set(e)
			internValue(c)
			v.Set(c)
		}
	}
}

// structFields caches fieldsWithStrings by type: walking a PodSpec looks at
// the few of its fifty fields that are set and hold strings, without
// reading each field's name and type again.
var structFields sync.Map // reflect.Type -> []int

// fieldsWithStrings returns the indexes of the exported fields of struct
// type t that hold strings worth interning.
func fieldsWithStrings(t reflect.Type) []int {
	if f, ok := structFields.Load(t); ok {
		return f.([]int)
	}
	var fields []int
	for i := range t.NumField() {
		f := t.Field(i)
		if f.IsExported() && !neverRepeats[f.Name] && holdsStrings(f.Type) {
			fields = append(fields, i)
		}
	}
	structFields.Store(t, fields)
	return fields
}

// internMap interns a map's string keys and the strings of its values.
func internMap(v reflect.Value) {
	if v.IsNil() {
		return
	}
	if m, ok := v.Interface().(map[string]string); ok { // labels, annotations, data: no reflection
		for k, s := range m {
			m[intern(k)] = intern(s)
		}
		return
	}
	t := v.Type()
	keys, elems := t.Key().Kind() == reflect.String, holdsStrings(t.Elem())
	if !keys && !elems {
		return
	}
	var k, e reflect.Value
	if keys {
		k = reflect.New(t.Key()).Elem()
	}
	if elems {
		e = reflect.New(t.Elem()).Elem()
	}
	for it := v.MapRange(); it.Next(); {
		key, elem := it.Key(), it.Value()
		if keys {
			k.SetString(intern(key.String()))
			key = k
		}
		if elems {
			e.Set(elem)
			internValue(e)
			elem = e
		}
		v.SetMapIndex(key, elem)
	}
}

// stringTypes caches holdsStrings by type.
var stringTypes sync.Map // reflect.Type -> bool

// holdsStrings reports whether internValue can find a string to intern in a
// value of type t: types of numbers and byte slices are skipped whole.
func holdsStrings(t reflect.Type) bool {
	if h, ok := stringTypes.Load(t); ok {
		return h.(bool)
	}
	// A recursive type is assumed to hold strings while its fields are
	// looked at.
	stringTypes.Store(t, true)
	h := false
	switch t.Kind() {
	case reflect.String, reflect.Interface:
		h = true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		h = holdsStrings(t.Elem())
	case reflect.Map:
		h = t.Key().Kind() == reflect.String || holdsStrings(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if f.IsExported() && !neverRepeats[f.Name] && holdsStrings(f.Type) {
				h = true
				break
			}
		}
	}
	stringTypes.Store(t, h)
	return h
}
