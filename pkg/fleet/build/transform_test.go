package build_test

import (
	"context"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet/build"
)

// appliedConfigMap creates, with server-side apply, a ConfigMap in a fresh
// namespace that carries managed fields, kubectl's last applied configuration
// and one other annotation, and returns its key.
func appliedConfigMap(t *testing.T, c client.Client) client.ObjectKey {
	t.Helper()
	ns := testbed.Name("fields")
	testbed.CreateNamespace(t, c, ns)
	cm := corev1ac.ConfigMap("applied", ns).
		WithAnnotations(map[string]string{build.LastAppliedAnnotation: `{"kind":"ConfigMap"}`, "team": "a"}).
		WithData(map[string]string{"k": "v"})
	if err := c.Apply(context.Background(), cm, client.FieldOwner("test-writer")); err != nil {
		t.Fatal(err)
	}
	return client.ObjectKey{Namespace: ns, Name: "applied"}
}

// cachedConfigMap builds a cluster with opts, runs it and returns the
// ConfigMap at key as its cache holds it, as an object of obj's type.
func cachedConfigMap(t *testing.T, key client.ObjectKey, obj client.Object, opts ...cluster.Option) client.Object {
	t.Helper()
	cl, err := build.NewCluster(fleet.Config(0), opts...)
	if err != nil {
		t.Fatal(err)
	}
	startCluster(t, cl)
	if err := cl.GetCache().Get(context.Background(), key, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

func TestNewClusterCachesNoFieldManagement(t *testing.T) {
	key := appliedConfigMap(t, testbed.NewClient(t, fleet.Config(0)))
	meta := func() client.Object {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		return m
	}
	unstr := func() client.Object {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		return u
	}
	for name, obj := range map[string]func() client.Object{
		"typed":         func() client.Object { return &corev1.ConfigMap{} },
		"metadata-only": meta,
		"unstructured":  unstr,
	} {
		t.Run(name, func(t *testing.T) {
			got := cachedConfigMap(t, key, obj())
			if mf := got.GetManagedFields(); mf != nil {
				t.Errorf("cached object has managed fields: %v", mf)
			}
			if _, ok := got.GetAnnotations()[build.LastAppliedAnnotation]; ok {
				t.Errorf("cached object has %s", build.LastAppliedAnnotation)
			}
			if got.GetAnnotations()["team"] != "a" {
				t.Errorf("other annotations should stay, got %v", got.GetAnnotations())
			}
		})
	}
}

func TestKeepManagedFieldsKeepsThem(t *testing.T) {
	key := appliedConfigMap(t, testbed.NewClient(t, fleet.Config(0)))
	got := cachedConfigMap(t, key, &corev1.ConfigMap{}, build.KeepManagedFields())
	if !hasManager(got, "test-writer") {
		t.Errorf("managed fields of test-writer should be kept, got %v", got.GetManagedFields())
	}
	if _, ok := got.GetAnnotations()[build.LastAppliedAnnotation]; !ok {
		t.Errorf("%s should be kept, got %v", build.LastAppliedAnnotation, got.GetAnnotations())
	}
}

func hasManager(obj client.Object, manager string) bool {
	for _, e := range obj.GetManagedFields() {
		if e.Manager == manager {
			return true
		}
	}
	return false
}

// A user's transforms still run, after the strip: the default one and a
// type's own, which replaces the default in controller-runtime's cache.
func TestUsersTransformsRunAfterTheStrip(t *testing.T) {
	key := appliedConfigMap(t, testbed.NewClient(t, fleet.Config(0)))
	var sawManagedFields atomic.Bool
	label := func(value string) func(any) (any, error) {
		return func(in any) (any, error) {
			obj := in.(client.Object)
			if obj.GetManagedFields() != nil {
				sawManagedFields.Store(true)
			}
			obj.SetLabels(map[string]string{"transformed": value})
			return obj, nil
		}
	}
	for name, opt := range map[string]cluster.Option{
		"default": func(o *cluster.Options) { o.Cache.DefaultTransform = label("default") },
		"by-object": build.WithCacheByObject(&corev1.ConfigMap{}, cache.ByObject{
			Transform: label("by-object"),
		}),
		"namespace": func(o *cluster.Options) {
			o.Cache.DefaultNamespaces = map[string]cache.Config{key.Namespace: {Transform: label("namespace")}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := cachedConfigMap(t, key, &corev1.ConfigMap{}, opt)
			if got.GetLabels()["transformed"] != name {
				t.Errorf("the user's transform did not run: labels %v", got.GetLabels())
			}
			if got.GetManagedFields() != nil {
				t.Errorf("cached object has managed fields: %v", got.GetManagedFields())
			}
			if sawManagedFields.Load() {
				t.Error("the user's transform saw managed fields: it ran before the strip")
			}
		})
	}
}

// Writes are computed by the API server from the request and the object it
// stores: an Update of a cached object, which carries no managed fields,
// leaves the stored ones as they are, and server-side apply of a cached
// object's fields by another manager adds that manager beside the first.
func TestWritesOfCachedObjectsKeepFieldOwnership(t *testing.T) {
	ctx := context.Background()
	key := appliedConfigMap(t, testbed.NewClient(t, fleet.Config(0)))
	cl, err := build.NewCluster(fleet.Config(0))
	if err != nil {
		t.Fatal(err)
	}
	startCluster(t, cl)
	c := cl.GetClient()
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, key, cm); err != nil {
		t.Fatal(err)
	}
	if cm.ManagedFields != nil {
		t.Fatalf("cached object has managed fields: %v", cm.ManagedFields)
	}
	cm.Data["updated"] = "yes"
	if err := c.Update(ctx, cm, client.FieldOwner("test-updater")); err != nil {
		t.Fatal(err)
	}
	apply := corev1ac.ConfigMap(key.Name, key.Namespace).WithData(map[string]string{"applied": "yes"})
	if err := c.Apply(ctx, apply, client.FieldOwner("test-controller")); err != nil {
		t.Fatal(err)
	}

	stored := &corev1.ConfigMap{}
	if err := cl.GetAPIReader().Get(ctx, key, stored); err != nil {
		t.Fatal(err)
	}
	for _, manager := range []string{"test-writer", "test-updater", "test-controller"} {
		if !hasManager(stored, manager) {
			t.Errorf("the stored object lost the managed fields of %s: %v", manager, stored.ManagedFields)
		}
	}
	if stored.Data["k"] != "v" || stored.Data["updated"] != "yes" || stored.Data["applied"] != "yes" {
		t.Errorf("stored data %v", stored.Data)
	}
	// An Update sends the whole object: kubectl's annotation, not in the
	// cache, is dropped on the server as any annotation missing from an
	// Update would be (documented: use Patch or apply, or keep the fields).
	if _, ok := stored.Annotations[build.LastAppliedAnnotation]; ok {
		t.Error("the Update of a cached object kept the last applied configuration; the docs say it drops it")
	}
}
