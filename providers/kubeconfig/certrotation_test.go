package kubeconfig_test

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
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
// certificate of another user) keeps its cluster (see rotateSecret), and the
// cluster's new requests authenticate with the new certificate, though the
// informers' watches were open on a connection made with the old one.
func TestCertificateRotationKeepsTheCluster(t *testing.T) {
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
	ctx := context.Background()
	rotateSecret(t, member, kc1, kc2,
		func(cl cluster.Cluster) error {
			if !bytes.Equal(cl.GetConfig().CertData, two.CertData) {
				return fmt.Errorf("the cluster does not hold certificate 2 yet")
			}
			return nil
		},
		func(cl cluster.Cluster) {
			if user, err := whoAmI(ctx, cl); err != nil || user != member.ns+"-cert-1" {
				t.Fatalf("before the rotation the cluster authenticates as %q (%v), want %q", user, err, member.ns+"-cert-1")
			}
		},
		func(cl cluster.Cluster) {
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
		})
}
