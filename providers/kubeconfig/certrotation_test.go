package kubeconfig_test

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mcfleet "github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

// certUsers makes two users of member m, each with a client certificate
// signed by the member's CA, both allowed to read ConfigMaps everywhere, and
// returns their configs.
func certUsers(t *testing.T, m int, ns string) (one, two *rest.Config) {
	t.Helper()
	admin := testbed.NewClient(t, fleet.Config(m))
	names := [2]string{ns + "-cert-1", ns + "-cert-2"}
	var cfgs [2]*rest.Config
	for i, name := range names {
		cfg, err := fleet.AddUser(m, envtest.User{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		cfgs[i] = cfg
	}
	for _, obj := range []client.Object{
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: ns},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: ns},
			Subjects: []rbacv1.Subject{
				{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: names[0]},
				{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: names[1]},
			},
		},
	} {
		if err := admin.Create(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), obj) })
	}
	return cfgs[0], cfgs[1]
}

// whoAmI returns the user cl's requests authenticate as, from a
// SelfSubjectReview sent through cl's client.
func whoAmI(ctx context.Context, cl cluster.Cluster) (string, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := cl.GetClient().Create(ctx, review); err != nil {
		return "", err
	}
	return review.Status.UserInfo.Username, nil
}

// A Secret whose client certificate is rotated (same server, same CA, a
// certificate of another user) keeps its cluster: the member is not listed
// again, no object is reconciled again, the cluster never leaves engaged, and
// the cluster's new requests authenticate with the new certificate.
func TestCertificateRotationKeepsTheCluster(t *testing.T) {
	ctx := context.Background()
	const m = 2
	admin := testbed.NewClient(t, fleet.Config(m))
	member := &rotationMember{m: m, ns: testbed.Name("cert-rotation"), admin: admin}
	testbed.CreateNamespace(t, admin, member.ns)
	one, two := certUsers(t, m, member.ns)
	kc1, err := fleettest.KubeconfigFor(one, "member-"+strconv.Itoa(m))
	if err != nil {
		t.Fatal(err)
	}
	kc2, err := fleettest.KubeconfigFor(two, "member-"+strconv.Itoa(m))
	if err != nil {
		t.Fatal(err)
	}

	rec := &fleettest.Recorder{Namespace: member.ns}
	e := startSetUp(t, nil, kubeconfig.Options{}, func(mgr mcmanager.Manager) {
		if err := mcbuilder.ControllerManagedBy(mgr).Named("cert-rotation").
			For(&corev1.ConfigMap{}, mcbuilder.WithEngageWithLocalCluster(false), mcbuilder.WithEngageWithProviderClusters(true)).
			Complete(rec); err != nil {
			t.Fatal(err)
		}
	})
	host, ns, mgr, tracker := e.host, e.ns, e.mgr, e.tracker

	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rotating", Labels: map[string]string{kubeconfig.DefaultKubeconfigSecretLabel: "true"}},
		Data:       map[string][]byte{kubeconfig.DefaultKubeconfigSecretKey: kc1},
	}
	if err := host.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	testbed.CreateConfigMap(t, admin, member.ns, "before", nil)
	rec.WaitFor(t, 1, "rotating", member.ns, "before")
	cl, err := mgr.GetCluster(ctx, "rotating")
	if err != nil {
		t.Fatal(err)
	}
	if user, err := whoAmI(ctx, cl); err != nil || user != member.ns+"-cert-1" {
		t.Fatalf("before the rotation the cluster authenticates as %q (%v), want %q", user, err, member.ns+"-cert-1")
	}
	engine := mgr.(mcmanager.FleetOwner).Fleet()
	lists := member.listsOfConfigMaps(t)

	// Rotate: the Secret now holds the second user's certificate.
	secret.Data[kubeconfig.DefaultKubeconfigSecretKey] = kc2
	if err := host.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	fleettest.Eventually(t, 30*time.Second, func() error {
		now, err := mgr.GetCluster(ctx, "rotating")
		if err != nil {
			return err
		}
		if !bytes.Equal(now.GetConfig().CertData, two.CertData) {
			return fmt.Errorf("the cluster does not hold certificate 2 yet")
		}
		if now != cl {
			t.Error("the cluster was built again for certificate 2, want the running one rotated")
			cl = now
		}
		return nil
	})
	// New requests present certificate 2, though the informers' watches
	// were open on the connection certificate 1 made.
	fleettest.Eventually(t, 30*time.Second, func() error {
		user, err := whoAmI(ctx, cl)
		if err != nil {
			return err
		}
		if user != member.ns+"-cert-2" {
			return fmt.Errorf("the cluster authenticates as %q, want %q", user, member.ns+"-cert-2")
		}
		return nil
	})

	testbed.CreateConfigMap(t, admin, member.ns, "after", nil)
	rec.WaitFor(t, 1, "rotating", member.ns, "after")

	if got := member.listsOfConfigMaps(t); got != lists {
		t.Errorf("the member's API server answered %v LISTs of ConfigMaps (or watch-lists) after the rotation, want none", got-lists)
	}
	if n := rec.Count("rotating", member.ns, "before"); n != 1 {
		t.Errorf("an unchanged ConfigMap was reconciled %d times, want once", n)
	}
	if n := tracker.Count("rotating"); n != 1 {
		t.Errorf("the cluster was engaged %d times, want once (it left engaged)", n)
	}
	if s, _ := engine.State("rotating"); s != mcfleet.StateEngaged {
		t.Errorf("the cluster is %s, want engaged", s)
	}
	if err := host.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
}
