package namespace

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// verbsEnv is a virtual cluster over namespace "verbs", a neighbour
// namespace that must never be touched, and a direct client to check both.
type verbsEnv struct {
	ctx    context.Context
	vc     cluster.Cluster
	c      client.Client // the virtual cluster's
	direct client.Client
}

const (
	verbsNS     = "verbs"
	neighbourNS = "verbs-neighbour"
)

func TestClientVerbs(t *testing.T) {
	direct := directClient(t)
	ctx := context.Background()
	createNamespaces(t, direct, []string{verbsNS, neighbourNS})
	// The neighbour holds objects with the same names and labels.
	for _, name := range []string{"a", "b", "c"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: neighbourNS, Name: name, Labels: map[string]string{"app": "x"}}}
		if err := direct.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	env := startManager(t, nil, nil)
	var vc cluster.Cluster
	fleettest.Eventually(t, 30*time.Second, func() (err error) { vc, err = env.p.Get(ctx, verbsNS); return err })
	e := &verbsEnv{ctx: ctx, vc: vc, c: vc.GetClient(), direct: direct}

	t.Run("create get list", e.testCreateGetList)
	t.Run("update and patches", e.testUpdateAndPatches)
	t.Run("apply", e.testApply)
	t.Run("status and subresources", e.testSubResources)
	t.Run("delete and delete all of", e.testDelete)
	t.Run("other namespaces and cluster-scoped objects", e.testScope)

	// The neighbour was never touched.
	list := &corev1.ConfigMapList{}
	if err := direct.List(ctx, list, client.InNamespace(neighbourNS)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 3 {
		t.Errorf("neighbour namespace has %d ConfigMaps, want its 3", len(list.Items))
	}
	for _, cm := range list.Items {
		if len(cm.Data) != 0 {
			t.Errorf("neighbour ConfigMap %s was modified: %v", cm.Name, cm.Data)
		}
	}
}

// backing reads an object of the backing namespace directly.
func (e *verbsEnv) backing(t *testing.T, name string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := e.direct.Get(e.ctx, client.ObjectKey{Namespace: verbsNS, Name: name}, cm); err != nil {
		t.Fatalf("reading %s/%s directly: %v", verbsNS, name, err)
	}
	return cm
}

func (e *verbsEnv) testCreateGetList(t *testing.T) {
	for _, name := range []string{"a", "b"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: VirtualNamespace, Name: name, Labels: map[string]string{"app": "x"}}}
		if err := e.c.Create(e.ctx, cm); err != nil {
			t.Fatal(err)
		}
		if cm.Namespace != VirtualNamespace || cm.UID == "" {
			t.Errorf("after Create: namespace %q uid %q", cm.Namespace, cm.UID)
		}
	}
	// An empty namespace means the virtual cluster's too.
	if err := e.c.Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}); err != nil {
		t.Fatal(err)
	}
	e.backing(t, "a")
	e.backing(t, "c")

	fleettest.Eventually(t, 10*time.Second, func() error {
		cm := &corev1.ConfigMap{}
		if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: VirtualNamespace, Name: "a"}, cm); err != nil {
			return err
		}
		if cm.Namespace != VirtualNamespace {
			return fmt.Errorf("cached Get: namespace %q", cm.Namespace)
		}
		list := &corev1.ConfigMapList{}
		if err := e.c.List(e.ctx, list, client.MatchingLabels{"app": "x"}); err != nil {
			return err
		}
		if len(list.Items) != 2 {
			return fmt.Errorf("cached List by label: %d items, want 2", len(list.Items))
		}
		for _, item := range list.Items {
			if item.Namespace != VirtualNamespace {
				return fmt.Errorf("cached List: item namespace %q", item.Namespace)
			}
		}
		return nil
	})

	// Uncached reads, with field selectors including metadata.namespace.
	r := e.vc.GetAPIReader()
	cm := &corev1.ConfigMap{}
	if err := r.Get(e.ctx, client.ObjectKey{Namespace: VirtualNamespace, Name: "b"}, cm); err != nil || cm.Namespace != VirtualNamespace {
		t.Fatalf("APIReader Get: %v, namespace %q", err, cm.Namespace)
	}
	list := &corev1.ConfigMapList{}
	sel := fields.AndSelectors(fields.OneTermEqualSelector("metadata.name", "a"), fields.OneTermEqualSelector("metadata.namespace", VirtualNamespace))
	if err := r.List(e.ctx, list, client.MatchingFieldsSelector{Selector: sel}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "a" || list.Items[0].Namespace != VirtualNamespace {
		t.Fatalf("APIReader List by fields: %+v", list.Items)
	}
	// Unstructured and metadata-only reads map too.
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	if err := r.Get(e.ctx, client.ObjectKey{Namespace: VirtualNamespace, Name: "a"}, u); err != nil || u.GetNamespace() != VirtualNamespace {
		t.Fatalf("unstructured Get: %v, namespace %q", err, u.GetNamespace())
	}
	pl := &metav1.PartialObjectMetadataList{}
	pl.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := r.List(e.ctx, pl, client.MatchingLabels{"app": "x"}); err != nil || len(pl.Items) != 2 {
		t.Fatalf("metadata List: %v, %d items", err, len(pl.Items))
	}
}

func (e *verbsEnv) testUpdateAndPatches(t *testing.T) {
	cm := &corev1.ConfigMap{}
	if err := e.vc.GetAPIReader().Get(e.ctx, client.ObjectKey{Namespace: VirtualNamespace, Name: "a"}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"update": "1"}
	if err := e.c.Update(e.ctx, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Namespace != VirtualNamespace {
		t.Errorf("after Update: namespace %q", cm.Namespace)
	}

	orig := cm.DeepCopy()
	cm.Data["merge"] = "1"
	if err := e.c.Patch(e.ctx, cm, client.MergeFrom(orig)); err != nil {
		t.Fatalf("merge patch: %v", err)
	}
	orig = cm.DeepCopy()
	cm.Data["strategic"] = "1"
	if err := e.c.Patch(e.ctx, cm, client.StrategicMergeFrom(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		t.Fatalf("strategic merge patch: %v", err)
	}
	if err := e.c.Patch(e.ctx, cm, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"add","path":"/data/json","value":"1"}]`))); err != nil {
		t.Fatalf("JSON patch: %v", err)
	}
	ssa := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"default"},"data":{"ssa":"1"}}`)
	if err := e.c.Patch(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: VirtualNamespace, Name: "a"}},
		client.RawPatch(types.ApplyPatchType, ssa), client.FieldOwner("verbs-test")); err != nil {
		t.Fatalf("server-side apply patch: %v", err)
	}
	if cm.Namespace != VirtualNamespace {
		t.Errorf("after patches: namespace %q", cm.Namespace)
	}
	got := e.backing(t, "a").Data
	for _, k := range []string{"update", "merge", "strategic", "json", "ssa"} {
		if got[k] != "1" {
			t.Errorf("backing object lacks %q: %v", k, got)
		}
	}
}

func (e *verbsEnv) testApply(t *testing.T) {
	ac := corev1ac.ConfigMap("applied", VirtualNamespace).WithData(map[string]string{"k": "v"})
	if err := e.c.Apply(e.ctx, ac, client.FieldOwner("verbs-test")); err != nil {
		t.Fatal(err)
	}
	if ac.Namespace == nil || *ac.Namespace != VirtualNamespace || ac.UID == nil || *ac.UID == "" {
		t.Errorf("apply result: namespace %v uid %v", ac.Namespace, ac.UID)
	}
	if e.backing(t, "applied").Data["k"] != "v" {
		t.Error("applied data missing in the backing namespace")
	}
}

func (e *verbsEnv) testSubResources(t *testing.T) {
	labels := map[string]string{"app": "d"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: VirtualNamespace, Name: "d"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
	if err := e.c.Create(e.ctx, d); err != nil {
		t.Fatal(err)
	}
	d.Status.ObservedGeneration = 7
	if err := e.c.Status().Update(e.ctx, d); err != nil {
		t.Fatalf("status update: %v", err)
	}
	orig := d.DeepCopy()
	d.Status.ObservedGeneration = 8
	if err := e.c.Status().Patch(e.ctx, d, client.MergeFrom(orig)); err != nil {
		t.Fatalf("status patch: %v", err)
	}
	if d.Namespace != VirtualNamespace {
		t.Errorf("after status writes: namespace %q", d.Namespace)
	}
	real := &appsv1.Deployment{}
	if err := e.direct.Get(e.ctx, client.ObjectKey{Namespace: verbsNS, Name: "d"}, real); err != nil {
		t.Fatal(err)
	}
	if real.Status.ObservedGeneration != 8 {
		t.Errorf("backing deployment status: observedGeneration %d, want 8", real.Status.ObservedGeneration)
	}

	status := appsv1ac.Deployment("d", VirtualNamespace).WithStatus(appsv1ac.DeploymentStatus().WithObservedGeneration(9))
	if err := e.c.Status().Apply(e.ctx, status, client.FieldOwner("verbs-test"), client.ForceOwnership); err != nil {
		t.Fatalf("status apply: %v", err)
	}
	if status.Namespace == nil || *status.Namespace != VirtualNamespace {
		t.Errorf("status apply result namespace %v", status.Namespace)
	}
	if err := e.direct.Get(e.ctx, client.ObjectKey{Namespace: verbsNS, Name: "d"}, real); err != nil {
		t.Fatal(err)
	}
	if real.Status.ObservedGeneration != 9 {
		t.Errorf("backing deployment after status apply: observedGeneration %d, want 9", real.Status.ObservedGeneration)
	}

	scale := &autoscalingv1.Scale{}
	if err := e.c.SubResource("scale").Get(e.ctx, d, scale); err != nil {
		t.Fatalf("scale get: %v", err)
	}
	if scale.Namespace != VirtualNamespace {
		t.Errorf("scale namespace %q", scale.Namespace)
	}
	scale.Spec.Replicas = 3
	if err := e.c.SubResource("scale").Update(e.ctx, d, client.WithSubResourceBody(scale)); err != nil {
		t.Fatalf("scale update: %v", err)
	}
	if err := e.direct.Get(e.ctx, client.ObjectKey{Namespace: verbsNS, Name: "d"}, real); err != nil {
		t.Fatal(err)
	}
	if real.Spec.Replicas == nil || *real.Spec.Replicas != 3 {
		t.Errorf("backing deployment replicas %v, want 3", real.Spec.Replicas)
	}

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: VirtualNamespace, Name: "sa"}}
	if err := e.c.Create(e.ctx, sa); err != nil {
		t.Fatal(err)
	}
	tr := &authenticationv1.TokenRequest{}
	if err := e.c.SubResource("token").Create(e.ctx, sa, tr); err != nil {
		t.Fatalf("token request: %v", err)
	}
	if tr.Status.Token == "" {
		t.Error("token request returned no token")
	}
}

func (e *verbsEnv) testDelete(t *testing.T) {
	if err := e.c.Delete(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: VirtualNamespace, Name: "c"}}); err != nil {
		t.Fatal(err)
	}
	err := e.direct.Get(e.ctx, client.ObjectKey{Namespace: verbsNS, Name: "c"}, &corev1.ConfigMap{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("deleted object still in the backing namespace: %v", err)
	}
	// DeleteAllOf without a namespace stays inside the virtual cluster.
	if err := e.c.DeleteAllOf(e.ctx, &corev1.ConfigMap{}, client.MatchingLabels{"app": "x"}); err != nil {
		t.Fatal(err)
	}
	list := &corev1.ConfigMapList{}
	if err := e.direct.List(e.ctx, list, client.InNamespace(verbsNS), client.MatchingLabels{"app": "x"}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("DeleteAllOf left %d objects", len(list.Items))
	}
}

func (e *verbsEnv) testScope(t *testing.T) {
	err := e.c.Get(e.ctx, client.ObjectKey{Namespace: "kube-system", Name: "x"}, &corev1.ConfigMap{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("Get in another namespace: %v, want NotFound", err)
	}
	err = e.c.Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: neighbourNS, Name: "escape"}})
	if !apierrors.IsNotFound(err) {
		t.Errorf("Create in another namespace: %v, want NotFound", err)
	}
	if err := e.c.List(e.ctx, &corev1.ConfigMapList{}, client.InNamespace(neighbourNS)); !apierrors.IsNotFound(err) {
		t.Errorf("List in another namespace: %v, want NotFound", err)
	}
	// Cluster-scoped objects are the shared API server's.
	ns := &corev1.Namespace{}
	if err := e.c.Get(e.ctx, client.ObjectKey{Name: neighbourNS}, ns); err != nil {
		t.Errorf("cluster-scoped Get: %v", err)
	}
	// Unsupported informer operations say so.
	inf, err := e.vc.GetCache().GetInformer(e.ctx, &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	if err := inf.AddIndexers(nil); err == nil {
		t.Error("AddIndexers on a virtual informer succeeded")
	}
	if _, err := inf.AddEventHandlerWithResyncPeriod(nil, time.Minute); err == nil {
		t.Error("a resync period was accepted")
	}
	if err := e.vc.GetCache().Start(e.ctx); err == nil {
		t.Error("starting the virtual cache succeeded")
	}
	if err := e.vc.Start(e.ctx); err == nil {
		t.Error("starting an engaged virtual cluster twice succeeded")
	}
	if !errors.Is(e.vc.GetCache().Start(e.ctx), errCacheStart) {
		t.Error("cache Start error does not wrap errCacheStart")
	}
}
