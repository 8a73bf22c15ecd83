package kubeconfig_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/mcruntime/multicluster-runtime/internal/mctest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

func TestRegisterEngagesWithAServiceAccountToken(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	opts := kubeconfig.RegisterOptions{
		ClusterName:        "registered",
		Namespace:          e.ns,
		ServiceAccountName: "reader-" + e.ns,
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"},
		}},
	}
	if _, err := kubeconfig.Register(ctx, fleet.Config(2), e.host, opts); err != nil {
		t.Fatal(err)
	}
	first := mctest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{"registered": 2})

	// The cluster acts as the ServiceAccount: ConfigMaps yes, Secrets no.
	err := first["registered"].GetAPIReader().List(ctx, &corev1.SecretList{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("listing Secrets as the registered ServiceAccount: %v, want Forbidden", err)
	}

	// Registering again rotates the token: the Secret changes and the cluster
	// is re-created with the new credentials.
	if _, err := kubeconfig.Register(ctx, fleet.Config(2), e.host, opts); err != nil {
		t.Fatal(err)
	}
	e.tracker.WaitDisengaged(t, first["registered"])
	second := mctest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{"registered": 2})
	if second["registered"] == first["registered"] {
		t.Fatal("rotating the token did not re-create the cluster")
	}
	secret := &corev1.Secret{}
	if err := e.host.Get(ctx, clientKey(e.ns, "registered"), secret); err != nil {
		t.Fatal(err)
	}
	token := tokenOf(t, secret.Data[kubeconfig.DefaultKubeconfigSecretKey])
	if token == "" {
		t.Fatal("the registered kubeconfig has no token")
	}
	if contains(e.logs.String(), token) {
		t.Fatal("the ServiceAccount token leaked into the logs")
	}
}
