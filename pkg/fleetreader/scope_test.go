package fleetreader_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleetreader"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// A namespace given for a cluster-scoped type is treated as
// controller-runtime's cache treats it, read for read: a List in a
// namespace is the union of what each member's cache lists with the same
// options (nothing: its namespace index has no cluster-scoped object in a
// namespace; the API server would ignore the namespace instead), and a Get
// ignores it. Checked against the members' own caches, on real API
// servers, so that the reader follows controller-runtime if it changes.
func TestClusterScopedReadsFollowTheCache(t *testing.T) {
	ctx := context.Background()
	ns := seed(t, "scope")
	label := client.MatchingLabels{"fleetreader-scope": ns}
	for _, i := range []int{1, 2} {
		c := testbed.NewClient(t, members.Config(i))
		cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: label}}
		if err := c.Create(ctx, cr); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), cr) })
	}
	p := newConfigProvider(twoMembers())
	mgr := fleettest.NewManager(t, members.Config(0), p)
	r, err := mgr.GetFleetReader()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Informer(ctx, &rbacv1.ClusterRole{}); err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)

	// What the members' caches list, cluster by cluster, with opts.
	cacheList := func(opts ...client.ListOption) (string, error) {
		var out []string
		for _, name := range []string{"m1", "m2"} {
			cl, err := mgr.GetCluster(ctx, name)
			if err != nil {
				return "", err
			}
			var list rbacv1.ClusterRoleList
			if err := cl.GetCache().List(ctx, &list, opts...); err != nil {
				return "", fmt.Errorf("cluster %q: %w", name, err)
			}
			for _, o := range list.Items {
				out = append(out, name+"/"+o.Name)
			}
		}
		slices.Sort(out)
		return strings.Join(out, " "), nil
	}
	fleetList := func(opts ...client.ListOption) (string, error) {
		entries, err := fleetreader.List[*rbacv1.ClusterRole](ctx, r, opts...)
		var out []string
		for _, e := range entries {
			out = append(out, e.Cluster+"/"+e.Object.Name)
		}
		slices.Sort(out)
		return strings.Join(out, " "), err
	}
	both := "m1/" + ns + " m2/" + ns
	for _, opts := range [][]client.ListOption{
		{label},
		{label, client.InNamespace(ns)},
		{label, client.InNamespace("default")},
	} {
		fleettest.Eventually(t, 30*time.Second, func() error {
			want, err := cacheList(opts...)
			if err != nil {
				return err
			}
			if len(opts) == 1 && want != both {
				return fmt.Errorf("the members' caches list %q, want %q", want, both)
			}
			got, err := fleetList(opts...)
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("fleet reader List(%v) = %q; the members' caches list %q", opts, got, want)
			}
			return nil
		})
	}
	for _, key := range []client.ObjectKey{{Name: ns}, {Namespace: "default", Name: ns}} {
		var cr rbacv1.ClusterRole
		if err := r.Get(ctx, "m2", key, &cr); err != nil || cr.Name != ns {
			t.Errorf("Get(m2, %v) = %q, %v; want the ClusterRole, the namespace ignored as the cache ignores it", key, cr.Name, err)
		}
	}
}
