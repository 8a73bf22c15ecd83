package kind_test

// A minimal fleet of real control planes for this module's tests: the root
// module's internal test fleet is not importable from here. Swap it for the
// project's public test kit once it exists.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// fleet holds the control planes shared by the package's tests.
var fleet []*envtest.Environment

func TestMain(m *testing.M) {
	os.Exit(runMain(m, 3))
}

func runMain(m *testing.M, n int) int {
	logf.SetLogger(logr.Discard()) // each test logs through its manager's logger
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run through `make test`, or export it (see `make envtest-assets`)")
		return 1
	}
	fleet = make([]*envtest.Environment, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range fleet {
		fleet[i] = &envtest.Environment{BinaryAssetsDirectory: dir, ControlPlaneStartTimeout: 3 * time.Minute, ControlPlaneStopTimeout: time.Minute}
		wg.Go(func() { _, errs[i] = fleet[i].Start() })
	}
	wg.Wait()
	code := 1
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(os.Stderr, "starting control planes:", err)
	} else {
		code = m.Run()
	}
	for i, env := range fleet {
		if errs[i] == nil {
			_ = env.Stop()
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}

// kubeconfig returns a kubeconfig for control plane i, for a new user of
// its own: two calls give different credentials for the same server.
func kubeconfig(t *testing.T, i int, user string) string {
	t.Helper()
	u, err := fleet[i].AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	return string(kc)
}

// tracker is a multicluster.Aware runnable that records engagements.
type tracker struct {
	mu      sync.Mutex
	engaged map[string]cluster.Cluster
}

func newTracker() *tracker { return &tracker{engaged: map[string]cluster.Cluster{}} }

func (t *tracker) Start(ctx context.Context) error { <-ctx.Done(); return nil }

func (t *tracker) Engage(ctx context.Context, name string, cl cluster.Cluster) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.engaged[name] = cl
	context.AfterFunc(ctx, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.engaged[name] == cl {
			delete(t.engaged, name)
		}
	})
	return nil
}

func (t *tracker) snapshot() map[string]cluster.Cluster {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.engaged)
}

// expectEngaged waits until exactly the clusters of want are engaged, each
// reaching the given control plane as the given user.
func expectEngaged(t *testing.T, tr *tracker, want map[string]identity) map[string]cluster.Cluster {
	t.Helper()
	var got map[string]cluster.Cluster
	eventually(t, time.Minute, func() error {
		got = tr.snapshot()
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
	cfg, err := clientcmdConfig(id.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if hostOf(cfg.Host) != hostOf(fleet[id.member].Config.Host) {
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

func clientcmdConfig(kubeconfig string) (*rest.Config, error) {
	return clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
}

// eventually polls f until it returns nil, failing the test after timeout.
func eventually(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
