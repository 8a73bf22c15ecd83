package clusters_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcfleet "github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// An index registered while a cluster of the members starts — published
// before the index, its cache syncing when the index comes — reaches that
// cluster: a reader registered after the manager started lists it by the
// field. Both kinds of member: one Members builds, and one handed to it
// pre-built. The member's Secrets fail to list until the index is
// registered, which holds its cache in its sync.
func TestIndexRegisteredWhileAClusterStartsReachesIt(t *testing.T) {
	admin := testbed.NewClient(t, fleet.Config(0))
	ns := testbed.Name("late-index")
	testbed.CreateNamespace(t, admin, ns)
	for _, v := range []string{"wanted", "other"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v}, Data: map[string]string{"k": v}}
		if err := admin.Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
	}
	byKey := func(o client.Object) []string { return []string{o.(*corev1.ConfigMap).Data["k"]} }
	for _, kind := range []string{"built", "pre-built"} {
		t.Run(kind, func(t *testing.T) {
			proxy := testbed.NewAPIProxy(t, fleet.Config(0))
			proxy.FailLists("secrets")
			tracker := fleettest.NewTracker()
			var m clusters.Members
			runEngine(t, mcfleet.Options{}, tracker, &m)
			// Registered before the member: its cache starts with an
			// informer of Secrets, which cannot sync yet.
			if err := m.IndexField(t.Context(), &corev1.Secret{}, "type", func(o client.Object) []string {
				return []string{string(o.(*corev1.Secret).Type)}
			}); err != nil {
				t.Fatal(err)
			}
			if kind == "built" {
				m.Set("member", "1", proxy.Config(), nil)
			} else {
				m.SetCluster("member", testbed.NewCluster(t, proxy.Config()), nil)
			}
			fleettest.Eventually(t, 30*time.Second, func() error {
				if proxy.Failed() == 0 {
					return fmt.Errorf("the member's cache has not listed Secrets yet")
				}
				return nil
			})
			if err := m.IndexField(t.Context(), &corev1.ConfigMap{}, "data.k", byKey); err != nil {
				t.Fatalf("IndexField while the member's cache syncs: %v", err)
			}
			proxy.FailLists("no-such-resource") // Secrets list again: the cache syncs
			var cl cluster.Cluster
			fleettest.Eventually(t, 30*time.Second, func() error {
				if cl = tracker.Engaged()["member"]; cl == nil {
					return fmt.Errorf("the member is not engaged")
				}
				return nil
			})
			var list corev1.ConfigMapList
			if err := cl.GetClient().List(t.Context(), &list, client.InNamespace(ns), client.MatchingFields{"data.k": "wanted"}); err != nil {
				t.Fatalf("listing the member by the index registered while it started: %v", err)
			}
			if len(list.Items) != 1 || list.Items[0].Name != "wanted" {
				t.Fatalf("listing by the index gave %d ConfigMaps, want the one named wanted", len(list.Items))
			}
		})
	}
}
