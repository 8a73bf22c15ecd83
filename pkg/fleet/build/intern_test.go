package build_test

import (
	"strings"
	"testing"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet/build"
)

// decoded returns obj as a cache gets it: decoded from the wire, every
// string its own copy.
func decoded[T runtime.Object](t *testing.T, obj T) T {
	t.Helper()
	data, err := runtime.Encode(scheme.Codecs.LegacyCodec(corev1.SchemeGroupVersion, appsv1.SchemeGroupVersion), obj)
	if err != nil {
		t.Fatal(err)
	}
	out := obj.DeepCopyObject().(T)
	if err := runtime.DecodeInto(scheme.Codecs.UniversalDecoder(), data, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func shared(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func internedCopies[T runtime.Object](t *testing.T, obj T) (T, T) {
	t.Helper()
	a, b := decoded(t, obj), decoded(t, obj)
	for _, o := range []T{a, b} {
		want := o.DeepCopyObject()
		if _, err := build.TransformInternStrings()(o); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(want, o) {
			t.Fatalf("interning changed the object: %v, want %v", o, want)
		}
	}
	return a, b
}

func TestInternedObjectsShareTheirStrings(t *testing.T) {
	long := strings.Repeat("x", 200)
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "team-a", UID: "1a2b", ResourceVersion: "42", Labels: map[string]string{"app.kubernetes.io/name": "web"}},
		Data:       map[string]string{"log-level": "info", "big": long},
	}
	a, b := internedCopies(t, cm)
	for _, s := range []struct{ what, a, b string }{
		{"namespace", a.Namespace, b.Namespace},
		{"name", a.Name, b.Name},
		{"a label's value", a.Labels["app.kubernetes.io/name"], b.Labels["app.kubernetes.io/name"]},
		{"a data value", a.Data["log-level"], b.Data["log-level"]},
	} {
		if !shared(s.a, s.b) {
			t.Errorf("%s %q is not shared between equal objects", s.what, s.a)
		}
	}
	for k := range a.Labels {
		for k2 := range b.Labels {
			if !shared(k, k2) {
				t.Errorf("label key %q is not shared between equal objects", k)
			}
		}
	}
	for _, s := range []struct{ what, a, b string }{
		{"the UID", string(a.UID), string(b.UID)},
		{"the resource version", a.ResourceVersion, b.ResourceVersion},
		{"a value of 200 bytes", a.Data["big"], b.Data["big"]},
	} {
		if shared(s.a, s.b) {
			t.Errorf("%s is shared: it should be left alone", s.what)
		}
	}
}

func TestInternedDeploymentsShareNestedStrings(t *testing.T) {
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:      "app",
			Image:     "registry.example.com/web:v1",
			Env:       []corev1.EnvVar{{Name: "REGION", Value: "eu-west-1"}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
		}}}}},
	}
	a, b := internedCopies(t, d)
	ca, cb := a.Spec.Template.Spec.Containers[0], b.Spec.Template.Spec.Containers[0]
	if !shared(ca.Image, cb.Image) || !shared(ca.Env[0].Value, cb.Env[0].Value) {
		t.Errorf("a container's image and environment are not shared between equal objects")
	}
	for k := range ca.Resources.Requests {
		for k2 := range cb.Resources.Requests {
			if !shared(string(k), string(k2)) {
				t.Errorf("resource name %q is not shared between equal objects", k)
			}
		}
	}
}

func TestInternedUnstructuredShareTheirStrings(t *testing.T) {
	obj := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"team-a","labels":{"tier":"web"}},"data":{"k":"v"}}`)); err != nil {
			t.Fatal(err)
		}
		return u
	}
	a, b := obj(), obj()
	for _, u := range []*unstructured.Unstructured{a, b} {
		if _, err := build.TransformInternStrings()(u); err != nil {
			t.Fatal(err)
		}
	}
	if !shared(a.GetLabels()["tier"], b.GetLabels()["tier"]) || !shared(a.GetNamespace(), b.GetNamespace()) {
		t.Error("an unstructured object's label and namespace are not shared between equal objects")
	}
	if a.GetLabels()["tier"] != "web" || a.Object["data"].(map[string]any)["k"] != "v" {
		t.Errorf("interning changed the object: %v", a.Object)
	}
}

// BenchmarkInternStrings is the transform's cost per object, for the objects
// of BenchmarkScaleObjects: a ConfigMap with labels and five settings and a
// Deployment with one container.
func BenchmarkInternStrings(b *testing.B) {
	t := &testing.T{}
	cm := decoded(t, &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "config-1", Namespace: "bench", UID: "1a2b", Labels: map[string]string{"app.kubernetes.io/name": "app-1", "app.kubernetes.io/part-of": "bench", "team": "team-1"}},
		Data:       map[string]string{"version": "v0", "log-level": "info", "endpoint": "https://service-1.example.internal:8443/api/v1", "feature-flag": "alpha=false,beta=true", "timeout": "30s"},
	})
	d := decoded(t, &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "app-1", Namespace: "bench", Labels: map[string]string{"app.kubernetes.io/name": "app-1"}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "app-1"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "app-1"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "registry.example.com/team/app-1:v1.1.0",
					Ports:     []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					Env:       []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "REGION", Value: "eu-west-1"}},
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
				}}},
			},
		},
	})
	if t.Failed() {
		b.Fatal("decoding the objects failed")
	}
	for name, obj := range map[string]runtime.Object{"configmap": cm, "deployment": d} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := build.TransformInternStrings()(obj); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Members built by NewCluster with WithInternedStrings intern what they
// cache: the same object read from two members' caches shares its
// namespace's memory (a cache's Get copies the object, and the copy keeps
// the strings it was given), with or without KeepManagedFields. Without the
// option (the default since issue 42: on members that differ it saved no
// heap and cost CPU), each member keeps its own copy.
func TestMembersShareTheStringsTheyCache(t *testing.T) {
	key := appliedConfigMap(t, testbed.NewClient(t, fleet.Config(0)))
	a := cachedConfigMap(t, key, &corev1.ConfigMap{}, build.WithInternedStrings())
	b := cachedConfigMap(t, key, &corev1.ConfigMap{}, build.KeepManagedFields(), build.WithInternedStrings())
	if a.GetNamespace() != key.Namespace || b.GetNamespace() != key.Namespace {
		t.Fatalf("cached namespaces %q and %q, want %q", a.GetNamespace(), b.GetNamespace(), key.Namespace)
	}
	if !shared(a.GetNamespace(), b.GetNamespace()) {
		t.Error("two members' copies of one object do not share its namespace's memory")
	}
	c := cachedConfigMap(t, key, &corev1.ConfigMap{})
	d := cachedConfigMap(t, key, &corev1.ConfigMap{})
	if shared(c.GetNamespace(), d.GetNamespace()) {
		t.Error("without WithInternedStrings, two members' copies of one object share its namespace's memory")
	}
}
