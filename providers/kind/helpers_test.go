package kind_test

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// fleet holds the control planes shared by the package's tests.
var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	logf.SetLogger(logr.Discard()) // each test logs through its manager's logger
	fleettest.RunMainWithOptions(m, 3, fleettest.Options{StartTimeout: 3 * time.Minute}, func(f *fleettest.Fleet) error {
		fleet = f
		return nil
	})
}

// kubeconfig returns a kubeconfig for control plane i, for a new user of
// its own: two calls give different credentials for the same server.
func kubeconfig(t *testing.T, i int, user string) string {
	t.Helper()
	cfg, err := fleet.AddUser(i, envtest.User{Name: user, Groups: []string{"system:masters"}})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := fleettest.KubeconfigFor(cfg, user)
	if err != nil {
		t.Fatal(err)
	}
	return string(kc)
}

// expectEngaged waits until exactly the clusters of want are engaged, each
// reaching the given control plane as the given user.
func expectEngaged(t *testing.T, tr *fleettest.Tracker, want map[string]identity) map[string]cluster.Cluster {
	t.Helper()
	var got map[string]cluster.Cluster
	fleettest.Eventually(t, time.Minute, func() error {
		got = tr.Engaged()
		if len(got) != len(want) {
			return fmt.Errorf("engaged %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}
		for name, id := range want {
			cl, ok := got[name]
			if !ok {
				return fmt.Errorf("%q is not engaged", name)
			}
			if g := identityOf(cl.GetConfig()); g != id.of(t) {
				return fmt.Errorf("%q reaches %s, want %s", name, g, id.of(t))
			}
		}
		return nil
	})
	return got
}

// identity is a control plane and the kubeconfig used for it.
type identity struct {
	member     int
	kubeconfig string
}

func (id identity) of(t *testing.T) string {
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(id.kubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	if hostOf(cfg.Host) != hostOf(fleet.Config(id.member).Host) {
		t.Fatalf("kubeconfig of member %d names %s", id.member, cfg.Host)
	}
	return identityOf(cfg)
}

// hostOf strips a server URL down to host and port.
func hostOf(server string) string {
	return strings.Trim(strings.TrimPrefix(server, "https://"), "/")
}

// identityOf names a server and a client certificate without printing it.
func identityOf(cfg *rest.Config) string {
	sum := sha256.Sum256(cfg.CertData)
	return fmt.Sprintf("%s (certificate %x)", cfg.Host, sum[:6])
}
