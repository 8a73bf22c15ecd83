package clusters_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcfleet "github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// tokens mints ServiceAccount tokens of one member, each bound to a Secret
// of its own: deleting the Secret invalidates the token.
type tokens struct {
	m     int
	ns    string
	admin client.Client
	mu    sync.Mutex
	n     int
}

func newTokens(t *testing.T, m int) *tokens {
	t.Helper()
	tk := &tokens{m: m, ns: testbed.Name("rotation"), admin: testbed.NewClient(t, fleet.Config(m))}
	testbed.CreateNamespace(t, tk.admin, tk.ns)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: tk.ns, Name: "member"}}
	if err := tk.admin.Create(context.Background(), sa); err != nil {
		t.Fatal(err)
	}
	return tk
}

// config returns a config of the member with a new token, and the name of
// the Secret the token is bound to.
func (tk *tokens) config(t *testing.T) (*rest.Config, string) {
	t.Helper()
	tk.mu.Lock()
	tk.n++
	holder := fmt.Sprintf("token-%d", tk.n)
	tk.mu.Unlock()
	token := testbed.BoundToken(t, tk.admin, tk.ns, "member", holder)
	full := fleet.Config(tk.m)
	return &rest.Config{Host: full.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: full.CAData}}, holder
}

// invalidate deletes the Secret holder, which invalidates its token.
func (tk *tokens) invalidate(t *testing.T, holder string) {
	t.Helper()
	if err := tk.admin.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tk.ns, Name: holder}}); err != nil {
		t.Fatal(err)
	}
}

// runEngine runs a fleet engine with opts, engaging tracker and more, and
// Members publishing to it, until the test ends.
func runEngine(t *testing.T, opts mcfleet.Options, tracker *fleettest.Tracker, m *clusters.Members, more ...multicluster.Aware) {
	t.Helper()
	engine := mcfleet.New(opts)
	engine.Subscribe(tracker)
	for _, a := range more {
		engine.Subscribe(a)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := engine.Start(ctx); err != nil {
			t.Errorf("engine: %v", err)
		}
	}()
	m.Start(ctx, engine, logr.Discard())
	t.Cleanup(func() {
		cancel()
		<-done
		m.Wait()
	})
}

// Credentials that change while no cluster runs with them (the first were
// refused, the attempt waits out its backoff) are tried at once, not after
// the backoff.
func TestNewCredentialsWhileNotRunningAreTriedAtOnce(t *testing.T) {
	tk := newTokens(t, 1)
	tracker := fleettest.NewTracker()
	var m clusters.Members
	// A backoff far longer than the wait below: only a new attempt made
	// for the new credentials engages the cluster in time.
	runEngine(t, mcfleet.Options{MinBackoff: 2 * time.Minute}, tracker, &m)

	good, _ := tk.config(t)
	bad := rest.CopyConfig(good)
	bad.BearerToken = "not-a-token-of-this-member"
	failed := make(chan error, 16)
	m.Set("member", "bad", bad, func(err error) {
		if err != nil {
			failed <- err
		}
	})
	select {
	case err := <-failed:
		if !strings.Contains(err.Error(), "Unauthorized") {
			t.Fatalf("the first attempt failed with %v, want Unauthorized", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the attempt with a refused token did not fail within 30s")
	}
	if replaced, changed := m.Set("member", "good", good, nil); !replaced || !changed {
		t.Errorf("Set of new credentials while nothing runs = replaced %v, changed %v; want a new attempt (true, true)", replaced, changed)
	}
	fleettest.Eventually(t, 30*time.Second, func() error {
		cl, ok := tracker.Engaged()["member"]
		if !ok {
			return fmt.Errorf("the member is not engaged")
		}
		if got := cl.GetConfig().BearerToken; got != good.BearerToken {
			return fmt.Errorf("the member is engaged with another token")
		}
		return nil
	})
}
