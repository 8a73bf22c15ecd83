package builder_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mchandler "github.com/mcruntime/multicluster-runtime/pkg/handler"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// The engage options choose the clusters a watch covers, and compose.
func TestEngageOptions(t *testing.T) {
	e := newEnv(t)
	both, hostOnly, fleetOnly, filtered := e.recorder(), e.recorder(), e.recorder(), e.recorder()
	must(t, e.builder("both").For(&corev1.ConfigMap{},
		mcbuilder.WithEngageWithLocalCluster(true), mcbuilder.WithEngageWithProviderClusters(true)).Complete(both))
	must(t, e.builder("host").For(&corev1.ConfigMap{},
		mcbuilder.WithEngageWithLocalCluster(true), mcbuilder.WithEngageWithProviderClusters(false)).Complete(hostOnly))
	must(t, e.builder("fleet").For(&corev1.ConfigMap{}).Complete(fleetOnly)) // the default with a provider
	must(t, e.builder("filtered").For(&corev1.ConfigMap{}, mcbuilder.WithClusterFilter(
		func(name string, _ cluster.Cluster) bool { return name == member(2) })).Complete(filtered))

	e.engage(1)
	e.engage(2)
	fleettest.RunManager(t, e.mgr)
	testbed.CreateConfigMap(t, e.host, e.ns, "cm", nil)
	testbed.CreateConfigMap(t, e.members[0], e.ns, "cm", nil)
	testbed.CreateConfigMap(t, e.members[1], e.ns, "cm", nil)

	for _, c := range []string{"", member(1), member(2)} {
		both.WaitFor(t, 1, c, e.ns, "cm")
	}
	hostOnly.WaitFor(t, 1, "", e.ns, "cm")
	fleetOnly.WaitFor(t, 1, member(1), e.ns, "cm")
	fleetOnly.WaitFor(t, 1, member(2), e.ns, "cm")
	filtered.WaitFor(t, 1, member(2), e.ns, "cm")

	// Every controller has processed the same three events by now; a fourth
	// event in the host is a barrier for those that watch it.
	testbed.CreateConfigMap(t, e.host, e.ns, "barrier", nil)
	both.WaitFor(t, 1, "", e.ns, "barrier")
	hostOnly.WaitFor(t, 1, "", e.ns, "barrier")
	testbed.CreateConfigMap(t, e.members[1], e.ns, "barrier", nil)
	fleetOnly.WaitFor(t, 1, member(2), e.ns, "barrier")
	filtered.WaitFor(t, 1, member(2), e.ns, "barrier")

	for _, c := range []string{member(1), member(2)} {
		if n := hostOnly.Count(c, e.ns, "cm"); n != 0 {
			t.Errorf("host-only watch saw %s: %d", c, n)
		}
	}
	if n := fleetOnly.Count("", e.ns, "cm"); n != 0 {
		t.Errorf("fleet-only watch saw the host: %d", n)
	}
	if n := filtered.Count(member(1), e.ns, "cm") + filtered.Count("", e.ns, "cm"); n != 0 {
		t.Errorf("filtered watch saw clusters its filter rejects: %v", filtered.Counts())
	}
}

// Owns enqueues the owner in the cluster of the owned object, and only there.
func TestOwnsStaysInTheOwnedObjectsCluster(t *testing.T) {
	e := newEnv(t)
	rec := e.recorder()
	must(t, e.builder().For(&corev1.ConfigMap{}).Owns(&corev1.Secret{}).Complete(rec))
	e.engage(1)
	e.engage(2)
	fleettest.RunManager(t, e.mgr)

	ctx := context.Background()
	secrets := map[int]*corev1.Secret{}
	for _, i := range []int{1, 2} {
		c := e.members[i-1]
		owner := testbed.CreateConfigMap(t, c, e.ns, "owner", nil)
		s := &corev1.Secret{}
		s.Namespace, s.Name = e.ns, "owned"
		if err := setOwner(c, owner, s); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		secrets[i] = s
	}
	// The owner is reconciled for its own creation and its Secret's; both
	// events may collapse into one request.
	rec.WaitFor(t, 1, member(1), e.ns, "owner")
	rec.WaitFor(t, 1, member(2), e.ns, "owner")
	testbed.CreateConfigMap(t, e.members[0], e.ns, "barrier", nil)
	testbed.CreateConfigMap(t, e.members[1], e.ns, "barrier", nil)
	rec.WaitFor(t, 1, member(1), e.ns, "barrier")
	rec.WaitFor(t, 1, member(2), e.ns, "barrier")
	before1, before2 := rec.Count(member(1), e.ns, "owner"), rec.Count(member(2), e.ns, "owner")

	// Change the owned Secret in member 2 only.
	s := secrets[2]
	s.StringData = map[string]string{"k": "v"}
	must(t, e.members[1].Update(ctx, s))
	rec.WaitFor(t, before2+1, member(2), e.ns, "owner")

	testbed.CreateConfigMap(t, e.members[0], e.ns, "barrier-2", nil)
	rec.WaitFor(t, 1, member(1), e.ns, "barrier-2")
	if n := rec.Count(member(1), e.ns, "owner"); n != before1 {
		t.Errorf("owner in %s reconciled %d times after a change in %s, want %d", member(1), n, member(2), before1)
	}
}

// The multi-cluster-aware pattern: a controller watches the host and fans out
// to every member; its reconciler writes a copy into each.
func TestHubToFleetFanOut(t *testing.T) {
	e := newEnv(t)
	for i := 1; i <= 3; i++ {
		e.engage(i)
	}
	fanOut := mchandler.EnqueueClusterRequestsFromMapFunc(func(_ context.Context, _ string, obj client.Object) []mcreconcile.Request {
		var reqs []mcreconcile.Request
		for _, name := range e.provider.ClusterNames() {
			reqs = append(reqs, fleettest.Request(name, obj.GetNamespace(), obj.GetName()))
		}
		return reqs
	})
	must(t, e.builder().
		Watches(&corev1.ConfigMap{}, fanOut, mcbuilder.WithEngageWithLocalCluster(true), mcbuilder.WithEngageWithProviderClusters(false)).
		Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (mcreconcile.Result, error) {
			if req.Namespace != e.ns {
				return mcreconcile.Result{}, nil
			}
			src := &corev1.ConfigMap{}
			if err := e.mgr.GetLocalManager().GetClient().Get(ctx, req.NamespacedName, src); err != nil {
				return mcreconcile.Result{}, client.IgnoreNotFound(err)
			}
			target, err := e.mgr.GetCluster(ctx, req.ClusterName)
			if err != nil {
				return mcreconcile.Result{}, err
			}
			cp := &corev1.ConfigMap{}
			cp.Namespace, cp.Name, cp.Data = src.Namespace, src.Name, src.Data
			return mcreconcile.Result{}, client.IgnoreAlreadyExists(target.GetClient().Create(ctx, cp))
		})))
	fleettest.RunManager(t, e.mgr)
	testbed.CreateConfigMap(t, e.host, e.ns, "policy", map[string]string{"rule": "deny-all"})

	for i := 1; i <= 3; i++ {
		c := e.members[i-1]
		fleettest.Eventually(t, 0, func() error {
			cp := &corev1.ConfigMap{}
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "policy"}, cp); err != nil {
				return err
			}
			if cp.Data["rule"] != "deny-all" {
				t.Fatalf("copy in %s has data %v", member(i), cp.Data)
			}
			return nil
		})
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
