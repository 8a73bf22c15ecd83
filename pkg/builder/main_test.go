package builder_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	clustersprovider "github.com/mcruntime/multicluster-runtime/providers/clusters"
)

// fleet is shared by the package's tests: member 0 is the host, 1..3 are the
// members. Tests stay independent by working in a namespace of their own.
var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	testbed.MustProvideAssets()
	fleettest.RunMain(m, 4, func(f *fleettest.Fleet) { fleet = f })
}

// env is one test's view of the shared fleet.
type env struct {
	t        testing.TB
	ns       string
	host     client.Client
	members  []client.Client // index i is member i+1
	provider *clustersprovider.Provider
	mgr      mcmanager.Manager
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// newEnv creates the test's namespace on the host and every member, and a
// manager on the host with a clusters provider that has not engaged anything.
func newEnv(t *testing.T) *env {
	// Named after the test, and unique per run (-count reruns in one process).
	ns := nonDNS.ReplaceAllString(strings.ToLower(t.Name()), "-")
	e := &env{t: t, ns: testbed.Name(ns[:min(len(ns), 50)])}
	e.host = testbed.NewClient(t, fleet.Config(0))
	testbed.CreateNamespace(t, e.host, e.ns)
	for i := 1; i < fleet.Len(); i++ {
		c := testbed.NewClient(t, fleet.Config(i))
		testbed.CreateNamespace(t, c, e.ns)
		e.members = append(e.members, c)
	}
	e.provider = clustersprovider.New()
	e.mgr = fleettest.NewManager(t, fleet.Config(0), e.provider)
	return e
}

// name of member i (1-based) in the provider.
func member(i int) string { return fmt.Sprintf("member-%d", i) }

// engage adds member i to the provider.
func (e *env) engage(i int) {
	e.t.Helper()
	if err := e.provider.Add(e.t.Context(), member(i), testbed.NewCluster(e.t, memberConfig(i))); err != nil {
		e.t.Fatalf("engaging %s: %v", member(i), err)
	}
}

func memberConfig(i int) *rest.Config { return fleet.Config(i) }

// recorder returns a recorder of the test's namespace.
func (e *env) recorder() *fleettest.Recorder { return &fleettest.Recorder{Namespace: e.ns} }

// builder starts a controller named after the test: controller names are
// unique per process.
func (e *env) builder(suffix ...string) *mcbuilder.Builder {
	return mcbuilder.ControllerManagedBy(e.mgr).Named(strings.Join(append([]string{e.ns}, suffix...), "-"))
}

// setOwner makes owner the controller of obj.
func setOwner(c client.Client, owner, obj client.Object) error {
	return controllerutil.SetControllerReference(owner, obj, c.Scheme())
}
