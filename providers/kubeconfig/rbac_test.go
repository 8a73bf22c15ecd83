package kubeconfig_test

import (
	"context"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// The provider needs nothing on the host beyond reading Secrets and writing
// Events in its own namespace.
func TestProviderRunsWithNamespaceScopedRBAC(t *testing.T) {
	e := startAs(t, func(ns string) *rest.Config { return namespaceScopedIdentity(t, ns) })
	ctx := context.Background()
	if err := e.host.Create(ctx, e.secret(t, "scoped", 1)); err != nil {
		t.Fatal(err)
	}
	fleettest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{"scoped": 1})

	// Unlabelling is seen through the label-filtered cache.
	s := &corev1.Secret{}
	if err := e.host.Get(ctx, clientKey(e.ns, "scoped"), s); err != nil {
		t.Fatal(err)
	}
	s.Labels = nil
	if err := e.host.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	fleettest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{})
}

// namespaceScopedIdentity returns a config for a host ServiceAccount that may
// only read Secrets and write Events in ns.
func namespaceScopedIdentity(t *testing.T, ns string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	admin, err := client.New(fleet.Config(0), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "provider"}}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "provider"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "provider"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "provider"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "provider"}},
	}
	for _, obj := range []client.Object{sa, role, binding} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	tr := &authenticationv1.TokenRequest{}
	if err := admin.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatal(err)
	}
	admCfg := fleet.Config(0)
	return &rest.Config{
		Host:            admCfg.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: admCfg.CAData},
		BearerToken:     tr.Status.Token,
		QPS:             admCfg.QPS,
		Burst:           admCfg.Burst,
	}
}
