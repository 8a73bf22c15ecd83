package kubeconfig_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mcfleet "github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/inventory"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

// rotationMember prepares member m for a rotation test: a namespace, a
// ServiceAccount that may read ConfigMaps everywhere, and one Secret per
// token, to which the token is bound: deleting the Secret invalidates it.
type rotationMember struct {
	m     int
	ns    string
	admin client.Client
}

func newRotationMember(t *testing.T, m int) *rotationMember {
	t.Helper()
	ctx := context.Background()
	r := &rotationMember{m: m, ns: testbed.Name("rotation"), admin: testbed.NewClient(t, fleet.Config(m))}
	testbed.CreateNamespace(t, r.admin, r.ns)
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "rotator"}},
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: r.ns},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: r.ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: r.ns},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: r.ns, Name: "rotator"}},
		},
	} {
		if err := r.admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.admin.Delete(context.Background(), obj) })
	}
	return r
}

// token mints a token of the ServiceAccount bound to a new Secret named
// holder, and returns a kubeconfig of the member that uses it.
func (r *rotationMember) token(t *testing.T, holder string) []byte {
	t.Helper()
	token := testbed.BoundToken(t, r.admin, r.ns, "rotator", holder)
	full := fleet.Config(r.m)
	kc, err := fleettest.KubeconfigFor(&rest.Config{Host: full.Host, BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAData: full.CAData}}, "member-"+strconv.Itoa(r.m))
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// invalidate deletes the Secret the token of holder is bound to, and waits
// until the member refuses that token.
func (r *rotationMember) invalidate(t *testing.T, holder string, kc []byte) {
	t.Helper()
	if err := r.admin.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: holder}}); err != nil {
		t.Fatal(err)
	}
	full := fleet.Config(r.m)
	cfg := &rest.Config{Host: full.Host, BearerToken: tokenOf(t, kc), TLSClientConfig: rest.TLSClientConfig{CAData: full.CAData}}
	cs := kubernetes.NewForConfigOrDie(cfg)
	fleettest.Eventually(t, 30*time.Second, func() error {
		// A GET: the test counts the LISTs the member answers.
		if _, err := cs.CoreV1().ConfigMaps(r.ns).Get(context.Background(), "none", metav1.GetOptions{}); !apierrors.IsUnauthorized(err) {
			return fmt.Errorf("the token bound to %s is still accepted (%v)", holder, err)
		}
		return nil
	})
}

// listsOfConfigMaps returns how often the member's API server answered a
// LIST of ConfigMaps, or a watch-list.
func (r *rotationMember) listsOfConfigMaps(t *testing.T) float64 {
	t.Helper()
	return testbed.ListsServed(t, fleet.Config(r.m), "configmaps")
}

// rotateSecret runs a kubeconfig Secret through a rotation from kc1 to kc2,
// both for member, with a controller reconciling the ConfigMaps of the
// member's namespace: before runs once the cluster is engaged; the rotation
// is done once holds accepts the engaged cluster; after runs then. It checks
// that the cluster stayed the running one, rotated in place: the member was
// not listed again, no object was reconciled again, the cluster never left
// engaged, and an object created afterwards was reconciled.
func rotateSecret(t *testing.T, member *rotationMember, kc1, kc2 []byte, holds func(cluster.Cluster) error, before, after func(cluster.Cluster)) {
	t.Helper()
	ctx := context.Background()
	rec := &fleettest.Recorder{Namespace: member.ns}
	e := startSetUp(t, nil, kubeconfig.Options{}, func(mgr mcmanager.Manager) {
		if err := mcbuilder.ControllerManagedBy(mgr).Named(testbed.Name("rotation")).
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
	testbed.CreateConfigMap(t, member.admin, member.ns, "before", nil)
	rec.WaitFor(t, 1, "rotating", member.ns, "before")
	cl, err := mgr.GetCluster(ctx, "rotating")
	if err != nil {
		t.Fatal(err)
	}
	before(cl)
	engine := mgr.(mcmanager.FleetOwner).Fleet()
	lists := member.listsOfConfigMaps(t)

	secret.Data[kubeconfig.DefaultKubeconfigSecretKey] = kc2
	if err := host.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	fleettest.Eventually(t, 30*time.Second, func() error {
		now, err := mgr.GetCluster(ctx, "rotating")
		if err != nil {
			return err
		}
		if err := holds(now); err != nil {
			return err
		}
		if now != cl {
			t.Error("the cluster was built again for the new credentials, want the running one rotated")
			cl = now
		}
		return nil
	})
	after(cl)

	testbed.CreateConfigMap(t, member.admin, member.ns, "after", nil)
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

// A Secret whose token is rotated (same server, same CA, a new token; the old
// one then invalidated) keeps its cluster (see rotateSecret), and objects
// created afterwards are reconciled with the new token.
func TestTokenRotationKeepsTheCluster(t *testing.T) {
	member := newRotationMember(t, 1)
	kc1, kc2 := member.token(t, "token-1"), member.token(t, "token-2")
	rotateSecret(t, member, kc1, kc2,
		func(cl cluster.Cluster) error {
			if cl.GetConfig().BearerToken != tokenOf(t, kc2) {
				return fmt.Errorf("the cluster does not use token 2 yet")
			}
			return nil
		},
		func(cluster.Cluster) {},
		func(cluster.Cluster) { member.invalidate(t, "token-1", kc1) })
}

// A Secret edited to a token the member rejects keeps its running cluster
// on its working token: the same instance stays engaged and reads, one
// Warning Event on the Secret and one log line name the cluster and the
// Secret (never the token), and a valid token given next is rotated in in
// place.
func TestRejectedTokenInTheSecretIsRefusedOnce(t *testing.T) {
	member := newRotationMember(t, 1)
	kc1, kc3 := member.token(t, "token-1"), member.token(t, "token-3")
	bad := "not-a-token-of-this-member"
	full := fleet.Config(1)
	kc2, err := fleettest.KubeconfigFor(&rest.Config{Host: full.Host, BearerToken: bad,
		TLSClientConfig: rest.TLSClientConfig{CAData: full.CAData}}, "member-1")
	if err != nil {
		t.Fatal(err)
	}
	e := start(t)
	ctx := context.Background()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "refused", Labels: map[string]string{kubeconfig.DefaultKubeconfigSecretLabel: "true"}},
		Data:       map[string][]byte{kubeconfig.DefaultKubeconfigSecretKey: kc1},
	}
	if err := e.host.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	var cl cluster.Cluster
	fleettest.Eventually(t, 30*time.Second, func() error {
		cl, err = e.mgr.GetCluster(ctx, "refused")
		return err
	})
	read := func() error {
		var cms corev1.ConfigMapList
		return cl.GetAPIReader().List(ctx, &cms, client.InNamespace(member.ns))
	}

	secret.Data[kubeconfig.DefaultKubeconfigSecretKey] = kc2
	if err := e.host.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	events := e.waitForEvents(t, map[string]string{"refused": inventory.ReasonCredentialsRefused})
	refusals := 0
	for _, ev := range events {
		if ev.Reason != inventory.ReasonCredentialsRefused {
			continue
		}
		refusals++
		if !strings.Contains(ev.Note, `cluster "refused"`) || strings.Contains(ev.Note, bad) {
			t.Errorf("the Event does not name the cluster, or holds the token: %q", ev.Note)
		}
	}
	if refusals != 1 {
		t.Errorf("%d Events of the refusal, want one", refusals)
	}
	if err := read(); err != nil {
		t.Fatalf("a read after the refused rotation failed: %v", err)
	}
	if now, err := e.mgr.GetCluster(ctx, "refused"); err != nil || now != cl {
		t.Fatalf("after the refused rotation GetCluster = %v, %v; want the running cluster", now, err)
	}
	var lines []string
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(line, "Refused a rotation") {
			lines = append(lines, line)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "refused") || !strings.Contains(lines[0], e.ns) {
		t.Errorf("want one log line of the refusal that names the cluster and the Secret, have %q", lines)
	}
	if strings.Contains(e.logs.String(), bad) {
		t.Error("the log holds the rejected token")
	}

	secret.Data[kubeconfig.DefaultKubeconfigSecretKey] = kc3
	if err := e.host.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	fleettest.Eventually(t, 30*time.Second, func() error {
		if cl.GetConfig().BearerToken != tokenOf(t, kc3) {
			return fmt.Errorf("the cluster does not use token 3 yet")
		}
		return nil
	})
	if now, err := e.mgr.GetCluster(ctx, "refused"); err != nil || now != cl {
		t.Errorf("after a valid token GetCluster = %v, %v; want the running cluster rotated in place", now, err)
	}
	if err := read(); err != nil {
		t.Fatalf("a read with token 3 failed: %v", err)
	}
	if n := e.tracker.Count("refused"); n != 1 {
		t.Errorf("the cluster was engaged %d times, want once", n)
	}
}
