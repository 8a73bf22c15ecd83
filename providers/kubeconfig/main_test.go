package kubeconfig_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

// fleet is shared by every test. Member 0 is also the host that holds the
// Secrets; each test works in its own namespace of it.
var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	testbed.MustProvideAssets()
	fleettest.RunMainWithOptions(m, 3, fleettest.Options{}, func(f *fleettest.Fleet) error {
		fleet = f
		return f.MarkMembers()
	})
}

// env is one test's host namespace, manager and provider.
type env struct {
	ns      string
	host    client.Client
	tracker *fleettest.Tracker
	logs    *fleettest.LogBuffer
	mgr     mcmanager.Manager
	stop    func() // stops the manager before the test ends
}

// start creates a namespace on the host, and runs a manager with a
// kubeconfig provider for it until the test ends.
func start(t *testing.T) *env {
	return startAs(t, nil)
}

// startAs is start with the manager running as the identity identity returns
// for the namespace (nil: the admin).
func startAs(t *testing.T, identity func(ns string) *rest.Config) *env {
	t.Helper()
	return startWith(t, identity, kubeconfig.Options{})
}

// startWith is startAs with provider options; their Namespace is the test's.
func startWith(t *testing.T, identity func(ns string) *rest.Config, opts kubeconfig.Options) *env {
	t.Helper()
	return startSetUp(t, identity, opts, nil)
}

// startSetUp is startWith that lets setup, if not nil, add controllers to
// the manager before it runs, and gives the manager mcOpts. A test's own
// namespace is created unless opts.Namespace names one (another replica's).
func startSetUp(t *testing.T, identity func(ns string) *rest.Config, opts kubeconfig.Options, setup func(mcmanager.Manager), mcOpts ...mcmanager.Option) *env {
	t.Helper()
	ctx := context.Background()
	host, err := client.New(fleet.Config(0), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kubeconfig-"}}
	if opts.Namespace != "" {
		ns.Name = opts.Namespace
	} else if err := host.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	e := &env{ns: ns.Name, host: host, tracker: fleettest.NewTracker(), logs: &fleettest.LogBuffer{}}

	cfg := fleet.Config(0)
	if identity != nil {
		cfg = identity(e.ns)
	}
	opts.Namespace = e.ns
	p := kubeconfig.New(opts)
	mgr, err := mcmanager.New(cfg, p, mcmanager.Options{
		Logger:     e.logs.Logger(),
		Metrics:    server.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	}, mcOpts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetupWithManager(ctx, mgr); err != nil {
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
		_ = host.Delete(context.Background(), ns)
	})
	e.stop = fleettest.RunManager(t, mgr)

	return e
}

// secret returns a labelled kubeconfig Secret for member m.
func (e *env) secret(t *testing.T, name string, m int) *corev1.Secret {
	t.Helper()
	kc, err := fleet.Kubeconfig(m, "member-"+strconv.Itoa(m))
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: e.ns, Name: name,
			Labels: map[string]string{kubeconfig.DefaultKubeconfigSecretLabel: "true"},
		},
		Data: map[string][]byte{kubeconfig.DefaultKubeconfigSecretKey: kc},
	}
}

func clientKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

// tokenOf returns the token of a kubeconfig's current user.
func tokenOf(t *testing.T, kubeconfig []byte) string {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.BearerToken
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
