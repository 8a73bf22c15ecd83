package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/inventory"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// fleet: member 0 is the host holding the entries; 1 and 2 are clusters.
var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	fleettest.RunMainWithOptions(m, 3, fleettest.Options{}, func(f *fleettest.Fleet) error {
		fleet = f
		return f.MarkMembers()
	})
}

// token returns a new token of a cluster-admin ServiceAccount of member i.
func token(t *testing.T, i int) string {
	t.Helper()
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(fleet.Config(i))
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "inventory-example"}}
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err == nil {
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "inventory-example"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "default", Name: sa.Name}},
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

type env struct {
	ns   string
	host client.Client
}

// entry writes the entry name for member i, with a new token.
func (e *env) entry(t *testing.T, name, server string, i int) {
	t.Helper()
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name + CredentialsSuffix},
		Data: map[string][]byte{"token": []byte(token(t, i)), "ca.crt": fleet.Config(i).CAData}}
	if err := e.host.Create(ctx, secret); err != nil {
		if err := e.host.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name, Labels: map[string]string{EntryLabel: "true"}},
		Data: map[string]string{"server": server}}
	if err := e.host.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func (e *env) warnings(t *testing.T, name, reason string) error {
	list := &eventsv1.EventList{}
	if err := e.host.List(context.Background(), list, client.InNamespace(e.ns)); err != nil {
		return err
	}
	for _, ev := range list.Items {
		if ev.Regarding.Name == name && ev.Reason == reason {
			return nil
		}
	}
	return fmt.Errorf("no %s Event on %s", reason, name)
}

func TestEntriesAreTheFleet(t *testing.T) {
	ctx := context.Background()
	host, err := client.New(fleet.Config(0), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "entries-"}}
	if err := host.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	e := &env{ns: ns.Name, host: host}

	provider := NewProvider(e.ns)
	mgr, err := mcmanager.New(fleet.Config(0), provider, mcmanager.Options{
		Metrics:    server.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := provider.SetupWithManager(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	tracker := fleettest.NewTracker()
	if err := mgr.Add(tracker); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	reconciled := map[multicluster.ClusterName]bool{}
	err = mcbuilder.ControllerManagedBy(mgr).Named("identity").For(&corev1.ConfigMap{}).
		Complete(mcreconcile.Func(func(_ context.Context, req mcreconcile.Request) (mcreconcile.Result, error) {
			if req.Name == fleettest.IdentityConfigMap {
				mu.Lock()
				reconciled[req.ClusterName] = true
				mu.Unlock()
			}
			return mcreconcile.Result{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	fleettest.RunManager(t, mgr)

	e.entry(t, "alpha", fleet.Config(1).Host, 1)
	e.entry(t, "beta", fleet.Config(2).Host, 2)
	e.entry(t, "plain", "http://"+fleet.Config(2).Host, 2) // refused: not https
	fleettest.ExpectEngaged(t, tracker, map[multicluster.ClusterName]int{"alpha": 1, "beta": 2})
	fleettest.Eventually(t, fleettest.DefaultTimeout, func() error {
		mu.Lock()
		defer mu.Unlock()
		if !reconciled["alpha"] || !reconciled["beta"] {
			return fmt.Errorf("reconciled the identity ConfigMap of %v; want alpha and beta", reconciled)
		}
		return nil
	})
	fleettest.Eventually(t, fleettest.DefaultTimeout, func() error { return e.warnings(t, "plain", ReasonInvalidEntry) })

	// A rotated token rotates in place: the cluster stays engaged as it was,
	// not engaged again; withdrawn credentials disengage it.
	engagements := tracker.Count("alpha")
	e.entry(t, "alpha", fleet.Config(1).Host, 1)
	fleettest.Consistently(t, 2*time.Second, func() error {
		if n := tracker.Count("alpha"); n != engagements {
			return fmt.Errorf("alpha engaged %d times after its token changed, want %d: the rotation rebuilt it", n, engagements)
		}
		return nil
	})
	if err := host.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "beta" + CredentialsSuffix}}); err != nil {
		t.Fatal(err)
	}
	fleettest.ExpectEngaged(t, tracker, map[multicluster.ClusterName]int{"alpha": 1})
	fleettest.Eventually(t, fleettest.DefaultTimeout, func() error { return e.warnings(t, "beta", ReasonCredentialsMissed) })
	fleettest.Eventually(t, fleettest.DefaultTimeout, func() error { return e.warnings(t, "alpha", inventory.ReasonEngaged) })
}
