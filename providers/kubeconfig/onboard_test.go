package kubeconfig_test

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig/onboard"
)

func TestOnboardedClusterEngagesWithAServiceAccountToken(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	opts := onboard.Options{
		ClusterName:        "registered",
		Namespace:          e.ns,
		ServiceAccountName: "reader-" + e.ns,
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"},
		}},
	}
	if _, err := onboard.Cluster(ctx, fleet.Config(2), e.host, opts); err != nil {
		t.Fatal(err)
	}
	first := fleettest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{"registered": 2})

	// The cluster acts as the ServiceAccount: ConfigMaps yes, Secrets no.
	err := first["registered"].GetAPIReader().List(ctx, &corev1.SecretList{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("listing Secrets as the registered ServiceAccount: %v, want Forbidden", err)
	}

	// Registering again rotates the token: the Secret changes and the
	// running cluster takes the new token in place (same server, same CA).
	if _, err := onboard.Cluster(ctx, fleet.Config(2), e.host, opts); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{}
	if err := e.host.Get(ctx, clientKey(e.ns, "registered"), secret); err != nil {
		t.Fatal(err)
	}
	token := tokenOf(t, secret.Data[kubeconfig.DefaultKubeconfigSecretKey])
	if token == "" {
		t.Fatal("the registered kubeconfig has no token")
	}
	fleettest.Eventually(t, 0, func() error {
		if first["registered"].GetConfig().BearerToken != token {
			return errors.New("the running cluster does not use the new token")
		}
		return nil
	})
	if second := fleettest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{"registered": 2}); second["registered"] != first["registered"] || e.tracker.Count("registered") != 1 {
		t.Fatal("rotating the token re-created or re-engaged the cluster")
	}
	if contains(e.logs.String(), token) {
		t.Fatal("the ServiceAccount token leaked into the logs")
	}
}

// When the host-side write fails, what onboard.Cluster created in the member is
// deleted, and the token it requested is revoked with its binding.
func TestOnboardCleansUpWhenTheHostWriteFails(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	member, err := client.New(fleet.Config(1), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// This identity may read Secrets on the host but not write them.
	readOnlyHost, err := client.New(namespaceScopedIdentity(t, e.ns), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	saNS := "reg-" + e.ns
	opts := onboard.Options{ClusterName: "cleanup", Namespace: e.ns, ServiceAccountNamespace: saNS, ServiceAccountName: "fleet"}
	if _, err := onboard.Cluster(ctx, fleet.Config(1), readOnlyHost, opts); !apierrors.IsForbidden(err) {
		t.Fatalf("onboarding with a read-only host: %v, want Forbidden", err)
	}
	gone := func(obj client.Object) bool {
		err := member.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return apierrors.IsNotFound(err) || (err == nil && !obj.GetDeletionTimestamp().IsZero())
	}
	rbacName := "multicluster-runtime:" + saNS + ":fleet"
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: saNS}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: saNS, Name: "fleet"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: rbacName}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: rbacName}},
	} {
		if !gone(obj) {
			t.Errorf("%T %s left behind in the member", obj, client.ObjectKeyFromObject(obj))
		}
	}

	// With a registration in place, a failed rotation keeps it and revokes
	// only the token it requested: one token binding remains, the working one.
	opts.ServiceAccountNamespace = saNS + "-b"
	opts.Rules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}}
	if _, err := onboard.Cluster(ctx, fleet.Config(1), e.host, opts); err != nil {
		t.Fatal(err)
	}
	fleettest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{"cleanup": 1})
	if _, err := onboard.Cluster(ctx, fleet.Config(1), readOnlyHost, opts); !apierrors.IsForbidden(err) {
		t.Fatalf("onboarding with a read-only host: %v, want Forbidden", err)
	}
	var bindings corev1.SecretList
	if err := member.List(ctx, &bindings, client.InNamespace(opts.ServiceAccountNamespace), client.HasLabels{onboard.TokenBindingLabel}); err != nil {
		t.Fatal(err)
	}
	live := 0
	for _, b := range bindings.Items {
		if b.DeletionTimestamp.IsZero() {
			live++
		}
	}
	if live != 1 {
		t.Errorf("%d token bindings in the member after a failed rotation, want 1", live)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: opts.ServiceAccountNamespace, Name: "fleet"}}
	if gone(sa) {
		t.Error("a failed rotation deleted the ServiceAccount of the working registration")
	}
	// The working registration still works.
	cl := e.tracker.Engaged()["cleanup"]
	if cl == nil {
		t.Fatal("the registered cluster is no longer engaged")
	}
	if err := cl.GetAPIReader().List(ctx, &corev1.ConfigMapList{}, client.InNamespace("default")); err != nil {
		t.Errorf("the working token no longer works: %v", err)
	}
}
