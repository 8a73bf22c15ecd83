package upstream_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/apis/v1alpha1"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/credentials"
)

// The upstream design's cluster-inventory-api program, run as a user runs
// it: ClusterProfiles on the host (KEP-4322), an access providers file
// (KEP-5339) naming the reference credential plugin, which hands out tokens
// of a ServiceAccount on the member. The program reads the member's
// ConfigMaps with those tokens alone: the ServiceAccount is the only identity
// on the member allowed to, and the operator's admin kubeconfig is the
// plugin's, not the program's.
func TestClusterInventoryAPI(t *testing.T) {
	const (
		member = 2
		saName = "upstream-inventory"
	)
	ctx := context.Background()
	if _, err := envtest.InstallCRDs(fleet.Config(0), envtest.CRDInstallOptions{
		Paths: []string{filepath.Join("..", "..", "providers", "cluster-inventory-api", "config", "crd")}, ErrorIfPathMissing: true,
	}); err != nil {
		t.Fatalf("installing the ClusterProfile CRD: %v", err)
	}
	grantConfigMapReader(t, member, "default", saName)

	// The operator's kubeconfig, which only the plugin reads.
	dir := t.TempDir()
	operator := filepath.Join(dir, "operator.kubeconfig")
	if err := fleet.WriteKubeconfig(member, operator, "member"); err != nil {
		t.Fatal(err)
	}
	server, err := url.Parse(fleet.Config(member).Host)
	if err != nil {
		t.Fatal(err)
	}
	file, err := yaml.Marshal(credentials.AccessProvidersConfig{Providers: []credentials.AccessProvider{{
		Name: "sa-token",
		ExecConfig: clientcmdv1.ExecConfig{
			APIVersion:         "client.authentication.k8s.io/v1",
			Command:            program(t, "../../cmd/serviceaccount-token-plugin"),
			Args:               []string{"-kubeconfig=" + operator, "-namespace=default", "-service-account=" + saName},
			ProvideClusterInfo: true,
		},
		AllowedServers: []string{server.Host}, // the member is on loopback
	}}})
	if err != nil {
		t.Fatal(err)
	}
	providers := filepath.Join(dir, "access-providers.yaml")
	if err := os.WriteFile(providers, file, 0o600); err != nil {
		t.Fatal(err)
	}

	out := run(t, "cluster-inventory-api", "-clusterprofile-provider-file", providers)
	hub := hubClient(t)
	cp := &v1alpha1.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "upstream-member"},
		Spec:       v1alpha1.ClusterProfileSpec{DisplayName: "upstream-member", ClusterManager: v1alpha1.ClusterManager{Name: "test"}},
	}
	if err := hub.Create(ctx, cp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), cp) })
	meta.SetStatusCondition(&cp.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionControlPlaneHealthy, Status: metav1.ConditionTrue, Reason: "Probed", Message: "set by the test",
	})
	cfg := fleet.Config(member)
	cp.Status.AccessProviders = []v1alpha1.AccessProvider{{
		Name: "sa-token", Cluster: clientcmdv1.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData},
	}}
	if err := hub.Status().Update(ctx, cp); err != nil {
		t.Fatal(err)
	}

	createConfigMap(t, member, "default", "hello-inventory")
	waitForLine(t, out, `"msg"="ConfigMap found"`, quoted("cluster", "default/upstream-member"), quoted("name", "hello-inventory"))
}

// hubClient is a client of the host that knows ClusterProfiles.
func hubClient(t *testing.T) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(fleet.Config(0), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// grantConfigMapReader creates the ServiceAccount namespace/name on member
// i, allowed to read ConfigMaps (and nothing else), until the test ends.
func grantConfigMapReader(t *testing.T, i int, namespace, name string) {
	t.Helper()
	c := testbed.NewClient(t, fleet.Config(i))
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}},
		// envtest runs no controller manager: the aggregated "view" role is
		// empty, so a role of its own.
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: []rbacv1.PolicyRule{{
				APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"},
			}},
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: namespace, Name: name}},
		},
	}
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}
}
