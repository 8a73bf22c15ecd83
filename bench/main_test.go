package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// server is the one real API server every benchmark cluster points at.
var apiServer *fleettest.Fleet

func TestMain(m *testing.M) {
	// Reconcilers' client calls log through the controller's logger.
	ctrllog.SetLogger(logr.Discard())
	if os.Getenv("FLEET") != "" {
		// BenchmarkFleet, one side of it, against fleetsim's members.
		os.Exit(m.Run())
	}
	testbed.MustProvideAssets()
	fleettest.RunMainWithOptions(m, 1, fleettest.Options{APIServerFlags: map[string]string{
		// A thousand clusters list at once; the defaults (400/200) would make
		// the server's admission, not the client, the thing measured.
		"max-requests-inflight":          "4000",
		"max-mutating-requests-inflight": "2000",
	}}, func(f *fleettest.Fleet) error { apiServer = f; return nil })
}

func config() *rest.Config {
	cfg := apiServer.Config(0)
	cfg.QPS, cfg.Burst = 5000, 10000
	return cfg
}

var nsCounter atomic.Int32

// seed creates a fresh namespace holding n ConfigMaps and returns its name.
//
// The seeding client has a transport of its own, closed when done: on the
// transport that the measured clients share, its connections would be pooled
// and spare the first measured side the TLS handshakes that the others make.
func seed(b *testing.B, n int) string {
	b.Helper()
	cfg := config()
	// A config with its own Dial gets a transport outside client-go's cache.
	cfg.Dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer utilnet.CloseIdleConnectionsFor(hc.Transport)
	c, err := client.New(cfg, client.Options{HTTPClient: hc})
	if err != nil {
		b.Fatal(err)
	}
	ns := fmt.Sprintf("bench-%d", nsCounter.Add(1))
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	createConfigMaps(b, c, ns, "seed", n)
	return ns
}

// createConfigMaps creates n ConfigMaps from 16 goroutines.
func createConfigMaps(b *testing.B, c client.Client, ns, prefix string, n int) {
	var wg sync.WaitGroup
	var failed atomic.Value
	next := atomic.Int32{}
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", prefix, i)}}
				if err := c.Create(context.Background(), cm); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatal(err)
	}
}

// inNamespace restricts a cluster's cache to one namespace, so that every
// benchmark sees exactly the objects it seeded. A field selector keeps one
// informer per type (DefaultNamespaces would add a multi-namespace layer).
func inNamespace(ns string) cluster.Option {
	return func(o *cluster.Options) {
		o.Cache.DefaultFieldSelector = fields.OneTermEqualSelector("metadata.namespace", ns)
		o.Logger = logr.Discard()
	}
}

// newManager returns a Multi-Cluster Manager on the benchmark server with
// logging, metrics and probes off.
func newManager(b *testing.B, provider multicluster.Provider) mcmanager.Manager {
	return newManagerOn(b, config(), provider)
}

// newManagerOn is newManager with cfg as the host.
func newManagerOn(b *testing.B, cfg *rest.Config, provider multicluster.Provider) mcmanager.Manager {
	mgr, err := mcmanager.New(cfg, provider, manager.Options{
		Metrics:                server.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Logger:                 managerLogger(),
	})
	if err != nil {
		b.Fatal(err)
	}
	return mgr
}

// managerLogger discards the library's logs, unless BENCH_LOG is set: then
// they go to stderr, to see why a run took as long as it did.
func managerLogger() logr.Logger {
	if os.Getenv("BENCH_LOG") == "" {
		return logr.Discard()
	}
	return zap.New(zap.WriteTo(os.Stderr))
}

// run starts mgr and returns a function that stops it and waits.
func run(b *testing.B, mgr interface{ Start(context.Context) error }) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}
}

// waitFor polls cond every millisecond until it holds or a minute passes.
func waitFor(b *testing.B, what string, cond func() bool) {
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// heapAndGoroutines returns the live heap after two collections and the
// goroutine count.
func heapAndGoroutines() (uint64, int) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, runtime.NumGoroutine()
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// closeIdleConnections closes the idle pooled connections of the transport
// that client-go shares among the configs with the benchmark server's
// credentials. The transport comes wrapped in round trippers that do not pass
// CloseIdleConnections on (http.Client's CloseIdleConnections did nothing:
// idle connections stayed until the API server's 90 s idle timeout), so it
// is unwrapped.
func closeIdleConnections() {
	if rt, err := rest.TransportFor(config()); err == nil {
		utilnet.CloseIdleConnectionsFor(rt)
	}
}

// settle waits (up to 30s) for the goroutine count to fall back to baseline
// after clusters were disengaged, and returns the heap and goroutine count.
// Teardown is asynchronous: informers stop and watch streams close after the
// engagement ends. Idle pooled connections to the API server belong to the
// process-wide transport that every client with these credentials shares;
// they expire on their own (90s idle timeout) and are closed here where
// possible (see closeIdleConnections). What remains in "goroutines-left" after a large fleet is their
// HTTP/2 read loops: about one connection per hundred watch streams, gone
// within the idle timeout (checked: 95s later the count is below baseline).
func settle(baseline int) (uint64, int) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		closeIdleConnections()
		heap, g := heapAndGoroutines()
		if g <= baseline || time.Now().After(deadline) {
			return heap, g
		}
		time.Sleep(50 * time.Millisecond)
	}
}
