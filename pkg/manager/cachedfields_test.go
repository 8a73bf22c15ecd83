package manager_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// applyConfigMap writes, with server-side apply as "test-writer", a ConfigMap
// that carries kubectl's last applied configuration.
func applyConfigMap(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	cm := corev1ac.ConfigMap(name, ns).
		WithAnnotations(map[string]string{clusters.LastAppliedAnnotation: `{"kind":"ConfigMap"}`}).
		WithData(map[string]string{"k": "v"})
	if err := c.Apply(context.Background(), cm, client.FieldOwner("test-writer")); err != nil {
		t.Fatal(err)
	}
}

func managedBy(obj client.Object, manager string) bool {
	for _, e := range obj.GetManagedFields() {
		if e.Manager == manager {
			return true
		}
	}
	return false
}

// fieldManagement says what a cached object holds of its writers' records.
func fieldManagement(obj client.Object) string {
	_, lastApplied := obj.GetAnnotations()[clusters.LastAppliedAnnotation]
	return fmt.Sprintf("managedFields=%t lastApplied=%t", obj.GetManagedFields() != nil, lastApplied)
}

const (
	stripped = "managedFields=false lastApplied=false"
	kept     = "managedFields=true lastApplied=true"
)

// The members' caches drop managed fields and kubectl's last applied
// configuration unless the manager or the cluster keeps them; the host's
// cache is controller-runtime's, untouched. A controller that reads from the
// cache and writes with server-side apply works either way: the API server
// computes ownership from the request.
func TestMemberCachesDropFieldManagementUnlessKept(t *testing.T) {
	ns := testbed.Name("cached-fields")
	for i := range 3 {
		c := testbed.NewClient(t, fleet.Config(i))
		testbed.CreateNamespace(t, c, ns)
		applyConfigMap(t, c, ns, "subject")
	}
	keepInMember2 := func(name multicluster.ClusterName) []cluster.Option {
		if name == fleettest.DefaultPrefix+"2" {
			return []cluster.Option{clusters.KeepManagedFields()}
		}
		return nil
	}
	for _, tc := range []struct {
		name     string
		opts     []mcmanager.Option
		provider []cluster.Option
		want     map[int]string // by member; 0 is the host
	}{
		{name: "default", want: map[int]string{0: kept, 1: stripped, 2: stripped}},
		{name: "per-manager", opts: []mcmanager.Option{mcmanager.WithClusterOptions(clusters.KeepManagedFields())},
			want: map[int]string{0: kept, 1: kept, 2: kept}},
		{name: "per-cluster", opts: []mcmanager.Option{mcmanager.WithClusterOptionsFor(keepInMember2)},
			want: map[int]string{0: kept, 1: stripped, 2: kept}},
		{name: "per-provider", provider: []cluster.Option{clusters.KeepManagedFields()},
			want: map[int]string{0: kept, 1: kept, 2: kept}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fleettest.NewProvider(fleet, fleettest.ProviderOptions{Members: []int{1, 2}, ClusterOptions: tc.provider})
			mgr := fleettest.NewManager(t, fleet.Config(0), p, tc.opts...)
			owner := testbed.Name("fleet-controller")
			var mu sync.Mutex
			seen := map[multicluster.ClusterName]string{} // what the reconciler read from its cache
			err := mcbuilder.ControllerManagedBy(mgr).Named(owner).
				For(&corev1.ConfigMap{}, mcbuilder.WithEngageWithLocalCluster(true), mcbuilder.WithPredicates(inNamespace(ns))).
				Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (mcreconcile.Result, error) {
					cl, err := mgr.GetCluster(ctx, req.ClusterName)
					if err != nil {
						return mcreconcile.Result{}, err
					}
					cm := &corev1.ConfigMap{}
					if err := cl.GetClient().Get(ctx, req.NamespacedName, cm); err != nil {
						return mcreconcile.Result{}, err
					}
					mu.Lock()
					seen[req.ClusterName] = fieldManagement(cm)
					mu.Unlock()
					apply := corev1ac.ConfigMap(req.Name, req.Namespace).WithLabels(map[string]string{"reconciled": "true"})
					return mcreconcile.Result{}, cl.GetClient().Apply(ctx, apply, client.FieldOwner(owner))
				}))
			if err != nil {
				t.Fatal(err)
			}
			fleettest.RunManager(t, mgr)

			names := map[int]multicluster.ClusterName{0: mcmanager.LocalCluster, 1: p.ClusterName(1), 2: p.ClusterName(2)}
			for i, name := range names {
				fleettest.Eventually(t, 0, func() error {
					stored := &corev1.ConfigMap{}
					if err := testbed.NewClient(t, fleet.Config(i)).Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "subject"}, stored); err != nil {
						return err
					}
					// The apply went through and owns its field beside the
					// first writer's.
					if !managedBy(stored, owner) || !managedBy(stored, "test-writer") || stored.Labels["reconciled"] != "true" {
						return fmt.Errorf("cluster %q: stored object's labels %v, managers %v", name, stored.Labels, stored.ManagedFields)
					}
					mu.Lock()
					defer mu.Unlock()
					if got := seen[name]; got != tc.want[i] {
						return fmt.Errorf("cluster %q: reconciler read %q from the cache, want %q", name, got, tc.want[i])
					}
					return nil
				})
			}
		})
	}
}
