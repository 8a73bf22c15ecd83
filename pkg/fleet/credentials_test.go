package fleet_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// tokenConfig returns a config for member i that authenticates with a fresh
// token of the ServiceAccount ns/sa, and nothing else.
func tokenConfig(t *testing.T, admin client.Client, i int, ns, sa string) *rest.Config {
	t.Helper()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(3600))}}
	if err := admin.SubResource("token").Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}, req); err != nil {
		t.Fatal(err)
	}
	full := members.Config(i)
	return &rest.Config{Host: full.Host, BearerToken: req.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: full.CAData}}
}

func ptrTo[T any](v T) *T { return &v }

// A cluster that starts rejecting its credentials (401) makes the engine ask
// the provider for fresh ones at once; the provider publishes them and the
// cluster is built again with them.
func TestCredentialRotationOn401(t *testing.T) {
	const ns = "rotation"
	ctx := context.Background()
	admin := testbed.NewClient(t, members.Config(1))
	testbed.CreateNamespace(t, admin, ns)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(admin.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "rotation-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
	}))
	for _, sa := range []string{"old", "new"} {
		must(admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}))
		must(admin.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "rotation-" + sa},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "rotation-reader"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: sa}},
		}))
	}
	oldCfg := tokenConfig(t, admin, 1, ns, "old")

	p := newConfigProvider(map[multicluster.ClusterName]*rest.Config{"rotating": oldCfg})
	var refreshed atomic.Int32
	var newCfg atomic.Pointer[rest.Config]
	p.members.Refresh = func(name multicluster.ClusterName) {
		refreshed.Add(1)
		if cfg := newCfg.Load(); cfg != nil {
			p.set(name, cfg) // the provider re-reads its source and finds new credentials
		}
	}
	// A threshold no probe sequence reaches in this test: the rotation must
	// come from the 401, not from a disconnection.
	health := mcmanager.HealthOptions{Interval: 200 * time.Millisecond, Timeout: time.Second, FailureThreshold: 1000}
	mgr := fleettest.NewManager(t, members.Config(0), p, mcmanager.WithHealthChecks(health))
	rec := fleetController(t, mgr, "rotation", ns)
	fleettest.RunManager(t, mgr)
	testbed.CreateConfigMap(t, admin, ns, "before", nil)
	rec.WaitFor(t, 1, "rotating", ns, "before")

	// The provider's source now holds new credentials; the old ones are revoked.
	newCfg.Store(tokenConfig(t, admin, 1, ns, "new"))
	must(admin.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "old"}}))
	fleettest.Eventually(t, 30*time.Second, func() error {
		if refreshed.Load() == 0 {
			return fmt.Errorf("provider not asked for fresh credentials")
		}
		cl, err := mgr.GetCluster(ctx, "rotating")
		if err != nil {
			return err
		}
		if cl.GetConfig().BearerToken != newCfg.Load().BearerToken {
			return fmt.Errorf("cluster still uses the old credentials")
		}
		return nil
	})
	if s, _ := mgr.(mcmanager.FleetOwner).Fleet().State("rotating"); s != fleet.StateEngaged {
		t.Fatalf("rotating is %s", s)
	}
	testbed.CreateConfigMap(t, admin, ns, "after", nil)
	rec.WaitFor(t, 1, "rotating", ns, "after")
}
