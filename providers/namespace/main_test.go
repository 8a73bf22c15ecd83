package namespace

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// fleet is one control plane shared by the package's tests and benchmarks.
// Tests stay independent by using namespaces of their own.
var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	testbed.MustProvideAssets()
	fleettest.RunMain(m, 1, func(f *fleettest.Fleet) { fleet = f })
}

// directClient is an uncached client of the shared API server.
func directClient(t testing.TB) client.Client {
	t.Helper()
	c, err := client.New(fleet.Config(0), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// createNamespaces creates namespaces, each with the given ConfigMap names.
func createNamespaces(t testing.TB, c client.Client, names []string, configMaps ...string) {
	t.Helper()
	ctx := context.Background()
	sem := make(chan struct{}, 16)
	errs := make(chan error, len(names))
	var wg sync.WaitGroup
	for _, ns := range names {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				errs <- err
				return
			}
			for _, cm := range configMaps {
				obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cm}, Data: map[string]string{"ns": ns}}
				if err := c.Create(ctx, obj); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// reqRecorder records reconciled requests.
type reqRecorder struct {
	mu   sync.Mutex
	seen map[mcreconcile.Request]time.Time
	ch   chan mcreconcile.Request
}

func newRecorder() *reqRecorder {
	return &reqRecorder{seen: map[mcreconcile.Request]time.Time{}}
}

func (r *reqRecorder) Reconcile(_ context.Context, req mcreconcile.Request) (reconcile.Result, error) {
	r.mu.Lock()
	if _, ok := r.seen[req]; !ok {
		r.seen[req] = time.Now()
	}
	ch := r.ch
	r.mu.Unlock()
	if ch != nil {
		select {
		case ch <- req:
		default:
		}
	}
	return reconcile.Result{}, nil
}

func (r *reqRecorder) has(req mcreconcile.Request) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.seen[req]
	return ok
}

func request(clusterName, name string) mcreconcile.Request {
	req := mcreconcile.Request{ClusterName: clusterName}
	req.Namespace, req.Name = VirtualNamespace, name
	return req
}

type testEnv struct {
	p   *Provider
	mgr mcmanager.Manager
	rec *reqRecorder
}

// startManager starts a manager over a namespace provider of the shared API
// server, with a ConfigMap controller recording its requests. setup runs
// before the manager starts. The manager stops when the test ends.
func startManager(t testing.TB, cfg *rest.Config, setup func(mgr mcmanager.Manager)) *testEnv {
	t.Helper()
	if cfg == nil {
		cfg = fleet.Config(0)
	}
	cl, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := New(cl)
	mgr, err := mcmanager.New(fleet.Config(0), p, mcmanager.Options{
		Metrics:    server.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	if err := mcbuilder.ControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Complete(rec); err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(mgr)
	}
	fleettest.RunManager(t, mgr)
	return &testEnv{p: p, mgr: mgr, rec: rec}
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}
