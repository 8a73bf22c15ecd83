package mctest

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"runtime"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"

	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// DefaultTimeout bounds Eventually when no timeout is given.
const DefaultTimeout = 30 * time.Second

// Consistently is fleettest.Consistently.
func Consistently(t testing.TB, d time.Duration, cond func() error) {
	t.Helper()
	fleettest.Consistently(t, d, cond)
}

// Eventually is fleettest.Eventually with this package's shorter default
// timeout: most waits in the project's own tests are for things that take
// milliseconds.
func Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	fleettest.Eventually(t, timeout, cond)
}

// Recorder is a reconciler that counts the requests it sees, optionally only
// those of one namespace, and returns what Result says.
type Recorder struct {
	// Namespace, if set, makes the recorder ignore (and succeed on) requests for
	// other namespaces, so that tests sharing clusters stay independent.
	Namespace string
	// Result, if set, decides the outcome of each recorded request.
	Result func(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error)

	mu     sync.Mutex
	counts map[mcreconcile.Request]int
}

var _ mcreconcile.Reconciler = &Recorder{}

// Reconcile records req.
func (r *Recorder) Reconcile(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
	if r.Namespace != "" && req.Namespace != r.Namespace {
		return reconcile.Result{}, nil
	}
	r.mu.Lock()
	if r.counts == nil {
		r.counts = map[mcreconcile.Request]int{}
	}
	r.counts[req]++
	r.mu.Unlock()
	if r.Result != nil {
		return r.Result(ctx, req)
	}
	return reconcile.Result{}, nil
}

// Count returns how often the request for cluster/namespace/name was seen.
func (r *Recorder) Count(cluster, namespace, name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[Req(cluster, namespace, name)]
}

// Counts returns a copy of every count.
func (r *Recorder) Counts() map[mcreconcile.Request]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.counts)
}

// WaitFor waits until the request has been seen at least n times.
func (r *Recorder) WaitFor(t testing.TB, n int, cluster, namespace, name string) {
	t.Helper()
	Eventually(t, 0, func() error {
		if got := r.Count(cluster, namespace, name); got < n {
			return fmt.Errorf("%s reconciled %d times, want at least %d (seen: %v)", Req(cluster, namespace, name), got, n, r.Counts())
		}
		return nil
	})
}

// Req builds a request.
func Req(cluster, namespace, name string) mcreconcile.Request {
	return mcreconcile.Request{ClusterName: cluster, Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}}
}

// Start runs mgr until the test ends and fails the test if it returns an error.
func Start(t testing.TB, mgr mcmanager.Manager) context.CancelFunc {
	t.Helper()
	return fleettest.RunManager(t, mgr)
}

// NewManager returns a Multi-Cluster Manager for the host at cfg with the
// metrics server and health probes off, so that tests do not fight over ports.
func NewManager(t testing.TB, cfg *rest.Config, provider multicluster.Provider, mcOpts ...mcmanager.Option) mcmanager.Manager {
	t.Helper()
	mgr, err := mcmanager.New(cfg, provider, mcmanager.Options{
		Metrics:                server.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	}, mcOpts...)
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

// NewCluster returns a cluster for cfg.
func NewCluster(t testing.TB, cfg *rest.Config, opts ...cluster.Option) cluster.Cluster {
	t.Helper()
	cl, err := cluster.New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// NewClient returns a direct (uncached) client for cfg.
func NewClient(t testing.TB, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// CreateNamespace creates a namespace through c, failing the test on error.
func CreateNamespace(t testing.TB, c client.Client, name string) {
	t.Helper()
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatalf("creating namespace %q: %v", name, err)
	}
}

// CreateConfigMap creates a ConfigMap through c, failing the test on error.
func CreateConfigMap(t testing.TB, c client.Client, namespace, name string, data map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: data}
	if err := c.Create(context.Background(), cm); err != nil {
		t.Fatalf("creating configmap %s/%s: %v", namespace, name, err)
	}
	return cm
}

// NumGoroutine counts the goroutines running now, except those of pooled
// connections to API servers: they belong to client-go's process-wide
// transports, which every client with the same configuration shares, and end
// on their own after the idle timeout (90 s). A leaked watch or informer
// shows in other goroutines.
func NumGoroutine() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		if !bytes.Contains(g, []byte("http2.(*ClientConn).readLoop")) && !bytes.Contains(g, []byte("net/http.(*persistConn).")) {
			count++
		}
	}
	return count
}

// WaitForGoroutines waits until at most baseline goroutines run, as counted
// by NumGoroutine, and fails the test with the stacks of every goroutine if
// they do not fall back in time.
func WaitForGoroutines(t testing.TB, baseline int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			var buf bytes.Buffer
			_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
			t.Fatalf("%d goroutines, %d before (pooled connections not counted); running:\n%s", NumGoroutine(), baseline, buf.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// HangingEndpoint accepts TCP connections and never writes to them, until the
// test ends.
func HangingEndpoint(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
	})
	return l.Addr().String()
}
