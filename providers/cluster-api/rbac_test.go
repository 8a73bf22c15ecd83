package capi_test

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	capi "github.com/mcruntime/multicluster-runtime/providers/cluster-api"
)

// The rules of the package documentation, granted in one namespace through a
// Role, are all the provider needs there.
func TestDocumentedRBACIsEnough(t *testing.T) {
	as := func(ns string) *rest.Config {
		admin, err := client.New(fleet.Config(0), client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		user := "capi-provider-" + ns
		ctx := context.Background()
		role := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "capi-provider"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"clusters"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
			},
		}
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "capi-provider"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}
		for _, o := range []client.Object{role, binding} {
			if err := admin.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		cfg, err := fleet.AddUser(0, envtest.User{Name: user})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	e := startAs(t, 0, capi.Options{}, as)
	kc := kubeconfig(t, 1, "capi-rbac")
	e.create(t, e.secret("a", kc))
	e.cluster(t, "a", true, nil)
	expectEngaged(t, e.tracker, map[string]identity{e.name("a"): {Member: 1, Kubeconfig: kc}})
}
