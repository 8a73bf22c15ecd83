package namespace

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// A virtual cluster's recorders refuse events about objects outside its
// namespace: they would land in another tenant's namespace.
func TestRecorderRefusesObjectsOfOtherNamespaces(t *testing.T) {
	c := directClient(t)
	ctx := context.Background()
	createNamespaces(t, c, []string{"rec-tenant-a", "rec-tenant-b"}, "subject")
	env := startManager(t, nil, nil)
	fleettest.Eventually(t, 30*time.Second, func() error { _, err := env.p.Get(ctx, "rec-tenant-a"); return err })
	a, err := env.p.Get(ctx, "rec-tenant-a")
	if err != nil {
		t.Fatal(err)
	}
	// Tenant B's object as the shared server knows it.
	theirs := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "rec-tenant-b", Name: "subject"}, theirs); err != nil {
		t.Fatal(err)
	}
	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: "rec-tenant-b", Name: "subject", UID: theirs.UID}
	clusterScoped := &rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}, ObjectMeta: metav1.ObjectMeta{Name: "admin"}}
	mine := &corev1.ConfigMap{}
	fleettest.Eventually(t, 10*time.Second, func() error {
		return a.GetClient().Get(ctx, client.ObjectKey{Namespace: VirtualNamespace, Name: "subject"}, mine)
	})

	before := testutil.ToFloat64(droppedEvents)
	rec := a.GetEventRecorder("rec-test")
	//lint:ignore SA1019 the old events API is part of cluster.Cluster and must be guarded too.
	legacy := a.GetEventRecorderFor("rec-test")
	rec.Eventf(theirs, nil, corev1.EventTypeWarning, "CrossTenant", "Test", "about another tenant's object")
	rec.Eventf(mine, theirs, corev1.EventTypeWarning, "CrossTenantRelated", "Test", "related to another tenant's object")
	rec.Eventf(clusterScoped, nil, corev1.EventTypeWarning, "ClusterScoped", "Test", "about a cluster-scoped object")
	legacy.Event(theirs, corev1.EventTypeWarning, "CrossTenantLegacy", "about another tenant's object")
	legacy.Event(ref, corev1.EventTypeWarning, "CrossTenantRef", "about another tenant's object")
	if got := testutil.ToFloat64(droppedEvents) - before; got != 5 {
		t.Errorf("%v events counted as dropped, want 5", got)
	}
	// The recorder still works for the tenant's own objects; once that
	// event is in, none of the refused ones is anywhere.
	rec.Eventf(mine, nil, corev1.EventTypeNormal, "Own", "Test", "about the tenant's own object")
	fleettest.Eventually(t, 30*time.Second, func() error {
		list := &corev1.EventList{}
		if err := c.List(ctx, list, client.InNamespace("rec-tenant-a")); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == "Own" {
				return nil
			}
		}
		return fmt.Errorf("no Own event in tenant A's namespace among %d", len(list.Items))
	})
	for _, ns := range []string{"rec-tenant-a", "rec-tenant-b", "default"} {
		list := &corev1.EventList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, e := range list.Items {
			if e.Reason != "Own" && (e.ReportingController == "rec-test" || e.Source.Component == "rec-test") {
				t.Errorf("refused event %s (%s) landed in namespace %s", e.Name, e.Reason, ns)
			}
		}
	}
}
