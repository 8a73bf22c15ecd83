package clusterinventoryapi_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	clusterinventoryapi "github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/apis/v1alpha1"
)

// The fleet: member 0 is the hub holding the ClusterProfile CRD and the
// profiles; members 1 and 2 are reached through the reference plugin.
var (
	fleet *fleettest.Fleet
	// plugin is the reference credential plugin, built for the tests.
	plugin string
	// operatorKubeconfig is the plugin's kubeconfig: admin contexts
	// "member-1" and "member-2".
	operatorKubeconfig []byte
	scheme             = runtime.NewScheme()
)

// The ServiceAccount the plugin returns tokens of, on members 1 and 2.
const (
	saNamespace = "default"
	saName      = "fleet-controller"
)

func TestMain(m *testing.M) {
	testbed.MustProvideAssets()
	fleettest.RunMainWithOptions(m, 3, fleettest.Options{}, func(f *fleettest.Fleet) error {
		fleet = f
		return setup(f)
	})
}

func setup(f *fleettest.Fleet) error {
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := f.MarkMembers(); err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(f.Config(0), envtest.CRDInstallOptions{
		Paths: []string{filepath.Join("config", "crd")}, ErrorIfPathMissing: true,
	}); err != nil {
		return fmt.Errorf("installing the ClusterProfile CRD: %w", err)
	}
	var err error
	if plugin, err = buildPlugin(); err != nil {
		return err
	}

	kc := clientcmdapi.NewConfig()
	for _, m := range []int{1, 2} {
		data, err := f.Kubeconfig(m, "member-"+strconv.Itoa(m))
		if err != nil {
			return err
		}
		one, err := clientcmd.Load(data)
		if err != nil {
			return err
		}
		maps.Copy(kc.Clusters, one.Clusters)
		maps.Copy(kc.AuthInfos, one.AuthInfos)
		maps.Copy(kc.Contexts, one.Contexts)
		if err := grantServiceAccount(f, m); err != nil {
			return err
		}
	}
	operatorKubeconfig, err = clientcmd.Write(*kc)
	return err
}

// buildPlugin builds the reference plugin into the user's cache directory
// (one binary, replaced atomically by each run) and returns its path.
func buildPlugin() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "multicluster-runtime", "cluster-inventory-api-test")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "serviceaccount-token-plugin")
	tmp := path + "." + strconv.Itoa(os.Getpid())
	build := exec.Command("go", "build", "-o", tmp, "github.com/mcruntime/multicluster-runtime/cmd/serviceaccount-token-plugin")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("building the plugin: %w", err)
	}
	return path, os.Rename(tmp, path)
}

// grantServiceAccount creates the ServiceAccount on member m, allowed to read
// ConfigMaps.
func grantServiceAccount(f *fleettest.Fleet, m int) error {
	c, err := client.New(f.Config(m), client.Options{})
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: saNamespace, Name: saName}}); err != nil {
		return err
	}
	// envtest runs no controller manager, so the aggregated "view" role is
	// empty: a role of its own.
	if err := c.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: saName},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"},
		}},
	}); err != nil {
		return err
	}
	return c.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: saName},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: saName},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: saNamespace, Name: saName}},
	})
}

// pluginProvider is an access provider running the reference plugin with
// the operator's kubeconfig, written for the test, and extra arguments,
// allowed to send credentials to members 1 and 2.
func pluginProvider(t testing.TB, name string, args ...string) clusterinventoryapi.AccessProvider {
	t.Helper()
	path := filepath.Join(t.TempDir(), "operator.kubeconfig")
	if err := os.WriteFile(path, operatorKubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return clusterinventoryapi.AccessProvider{
		Name:           name,
		AllowedServers: memberServers(), // they are on loopback

		ExecConfig: clientcmdv1.ExecConfig{
			APIVersion:         "client.authentication.k8s.io/v1",
			Command:            plugin,
			Args:               append([]string{"-kubeconfig=" + path, "-namespace=" + saNamespace}, args...),
			ProvideClusterInfo: true,
		},
	}
}

// env is one test's hub namespace, manager and provider.
type env struct {
	ns       string
	hub      client.Client
	provider *clusterinventoryapi.Provider
	tracker  *fleettest.Tracker
	logs     *fleettest.LogBuffer
	mgr      mcmanager.Manager
}

// start creates a namespace on the hub and runs a manager with a provider
// for it, configured by opts, until the test ends.
func start(t testing.TB, opts clusterinventoryapi.Options) *env {
	t.Helper()
	return startSetUp(t, opts, nil)
}

// startSetUp is start that lets setup, if not nil, add controllers to the
// manager before it runs.
func startSetUp(t testing.TB, opts clusterinventoryapi.Options, setup func(mcmanager.Manager)) *env {
	t.Helper()
	ctx := context.Background()
	hub, err := client.New(fleet.Config(0), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "inventory-"}}
	if err := hub.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	opts.Namespace = ns.Name
	p, err := clusterinventoryapi.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{ns: ns.Name, hub: hub, provider: p, tracker: fleettest.NewTracker(), logs: &fleettest.LogBuffer{}}
	mgr, err := mcmanager.New(fleet.Config(0), p, mcmanager.Options{
		Logger:     e.logs.Logger(),
		Metrics:    server.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetupWithManagerContext(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(e.tracker); err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(mgr)
	}
	e.mgr = mgr
	t.Cleanup(func() { // after the manager stopped
		if got := e.tracker.Engaged(); len(got) > 0 {
			t.Errorf("clusters still engaged after the manager stopped: %v", got)
		}
		_ = hub.Delete(context.Background(), ns)
	})
	fleettest.RunManager(t, mgr)

	return e
}

// profile describes a profile for member m (0: none) offering the named
// access providers, each with member m's server and CA and the plugin's
// extension naming the context "member-<m>".
type profile struct {
	name       string
	member     int
	healthy    bool
	providers  []string
	deprecated bool // offer them under status.credentialProviders
	context    int  // the member whose context the extension names (0: member)
	properties map[string]string
}

// create creates the profile and writes its status.
func (e *env) create(t testing.TB, p profile) *v1alpha1.ClusterProfile {
	t.Helper()
	cp := &v1alpha1.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: p.name},
		Spec:       v1alpha1.ClusterProfileSpec{DisplayName: p.name, ClusterManager: v1alpha1.ClusterManager{Name: "test"}},
	}
	if err := e.hub.Create(context.Background(), cp); err != nil {
		t.Fatal(err)
	}
	e.setStatus(t, cp, p)
	return cp
}

// setStatus writes p's status onto the profile cp.
func (e *env) setStatus(t testing.TB, cp *v1alpha1.ClusterProfile, p profile) {
	t.Helper()
	ctx := context.Background()
	if err := e.hub.Get(ctx, client.ObjectKeyFromObject(cp), cp); err != nil {
		t.Fatal(err)
	}
	status := metav1.ConditionFalse
	if p.healthy {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&cp.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionControlPlaneHealthy, Status: status, Reason: "Probed", Message: "set by the test",
	})
	cp.Status.Properties = nil
	for k, v := range p.properties {
		cp.Status.Properties = append(cp.Status.Properties, v1alpha1.Property{Name: k, Value: v, LastObservedTime: metav1.Now()})
	}
	var aps []v1alpha1.AccessProvider
	for _, name := range p.providers {
		aps = append(aps, v1alpha1.AccessProvider{Name: name, Cluster: memberCluster(t, p.member, p.context)})
	}
	//lint:ignore SA1019 profiles written with the deprecated field are under test
	cp.Status.AccessProviders, cp.Status.CredentialProviders = aps, nil
	if p.deprecated {
		//lint:ignore SA1019 profiles written with the deprecated field are under test
		cp.Status.AccessProviders, cp.Status.CredentialProviders = nil, aps
	}
	if err := e.hub.Status().Update(ctx, cp); err != nil {
		t.Fatal(err)
	}
}

// memberCluster is member m's kubeconfig cluster entry, without
// credentials, with the plugin's extension naming the context of member
// context (0: m). Member 0 stands for a server no context names.
func memberCluster(t testing.TB, m, context int) clientcmdv1.Cluster {
	t.Helper()
	if m == 0 {
		return clientcmdv1.Cluster{Server: "https://127.0.0.1:1"}
	}
	if context == 0 {
		context = m
	}
	cfg := fleet.Config(m)
	return clientcmdv1.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
		Extensions: []clientcmdv1.NamedExtension{{
			Name:      "client.authentication.k8s.io/exec",
			Extension: runtime.RawExtension{Raw: []byte(`{"context":"member-` + strconv.Itoa(context) + `"}`)},
		}},
	}
}
