package build_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet/build"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// http2Server is a TLS server speaking HTTP/2 that counts the connections
// made to it.
func http2Server(t *testing.T) (*rest.Config, *atomic.Int32) {
	t.Helper()
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}, &conns
}

// Clusters of one server and TLS configuration share client-go's transport:
// their first requests, all at once, open one connection, not one each.
func TestClustersOfOneServerConnectOnce(t *testing.T) {
	cfg, conns := http2Server(t)
	const n = 50
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		cl, err := build.NewCluster(cfg)
		if err != nil {
			t.Fatal(err)
		}
		hc := cl.GetHTTPClient()
		wg.Go(func() {
			<-start
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, cfg.Host+"/readyz", nil)
			resp, err := hc.Do(req)
			if err != nil {
				errs <- err
				return
			}
			_ = resp.Body.Close()
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := conns.Load(); got != 1 {
		t.Fatalf("%d clusters of one server opened %d connections, want 1", n, got)
	}
}

// A first request that cannot connect opens the gate too: the requests held
// behind it go on and fail on their own, none waits for good.
func TestClustersOfAnUnreachableServerAreNotHeldBack(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // connections are refused
	cfg := &rest.Config{Host: "https://" + addr, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	const n = 20
	var wg sync.WaitGroup
	var failed atomic.Int32
	for range n {
		cl, err := build.NewCluster(cfg)
		if err != nil {
			t.Fatal(err)
		}
		hc := cl.GetHTTPClient()
		wg.Go(func() {
			if resp, err := hc.Get(cfg.Host + "/readyz"); err == nil {
				_ = resp.Body.Close()
			} else {
				failed.Add(1)
			}
		})
	}
	wg.Wait() // a request held for good would hang here until the test's timeout
	if failed.Load() != n {
		t.Fatalf("%d of %d requests to a refused port failed", failed.Load(), n)
	}
}

// A request held at the gate behind a first connection that hangs (a watch
// whose TLS handshake never completes: client-go's transport gives up after
// 10 s) gives up at its own bound, not after the first connection does.
func TestRequestsHeldAtTheGateKeepTheirBound(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c // never answered: the handshake hangs
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		for c := range accepted {
			_ = c.Close()
		}
	})
	cfg := &rest.Config{Host: "https://" + l.Addr().String(), TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	const bound = 300 * time.Millisecond

	watcher, err := build.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/api/v1/configmaps?watch=true", nil)
		if resp, err := watcher.GetHTTPClient().Do(req); err == nil {
			_ = resp.Body.Close()
		}
	}()
	t.Cleanup(func() { cancel(); <-watchDone })
	select {
	case <-accepted: // the watch holds the gate, in its handshake
	case <-time.After(10 * time.Second):
		t.Fatal("the first request did not connect within 10s")
	}

	// Another cluster of the same server and TLS configuration: same transport, same gate.
	getter, err := build.NewCluster(cfg, build.WithRequestTimeout(bound))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, cfg.Host+"/api/v1/namespaces/default/configmaps/x", nil)
		resp, err := getter.GetHTTPClient().Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		got <- err
	}()
	select {
	case err := <-got:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a Get bounded to %s held at the gate returned %v, want its deadline", bound, err)
		}
	case <-watchDone:
		t.Fatalf("a Get bounded to %s waited for the first connection to fail", bound)
	case <-time.After(5 * time.Second):
		t.Fatalf("a Get bounded to %s held at the gate had not returned after 5s", bound)
	}
	select {
	case <-watchDone:
		t.Fatal("the first connection ended: the Get was not held behind it")
	default:
	}
}

// caBundle returns ca followed by a CA certificate of its own: a config
// with it trusts the same server with a TLS configuration no other shares,
// as a fleet's members each with their CA have.
func caBundle(t *testing.T, ca []byte) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: testbed.Name("extra-ca")},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return append(append(slices.Clip(ca), '\n'), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
}

// The connection gates of clusters that are gone go with them, and so do
// their transports, TLS configurations and client keys: a fleet whose
// members, each with a CA of its own, come and go holds the gates of the
// clusters that run, not of every cluster it ever built.
func TestConnectionGatesGoWithTheirClusters(t *testing.T) {
	const n = 20
	// A closed HTTP/2 connection's health-check timer holds its transport
	// until it fires, client-go's ReadIdleTimeout (30 s) after the last
	// read: a second here, so that the test waits for what it checks.
	t.Setenv("HTTP2_READ_IDLE_TIMEOUT_SECONDS", "1")
	runtime.GC() // the gates of earlier tests' clusters go
	before := build.ConnGates()
	var transports []weak.Pointer[http.Transport]
	var built []cluster.Cluster
	for range n {
		cfg := fleet.Config(0)
		cfg.CAData = caBundle(t, cfg.CAData)
		cl, err := build.NewCluster(cfg)
		if err != nil {
			t.Fatal(err)
		}
		pooled := build.PooledTransportOf(cl)
		if pooled == nil {
			t.Fatal("a cluster with a CA of its own has no pooled transport")
		}
		transports = append(transports, weak.Make(pooled))
		built = append(built, cl)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- cl.Start(ctx) }()
		if err := cl.GetAPIReader().List(ctx, &corev1.NamespaceList{}); err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for i, cl := range built {
		if !build.HasConnGate(cl) {
			t.Fatalf("cluster %d, held, has no connection gate of the process", i)
		}
	}
	built = nil
	fleettest.Eventually(t, 30*time.Second, func() error {
		runtime.GC()
		if got := build.ConnGates(); got > before {
			return fmt.Errorf("%d connection gates held after %d clusters with a CA each were built and let go, %d before", got, n, before)
		}
		for i, tr := range transports {
			if tr.Value() != nil {
				return fmt.Errorf("the transport of cluster %d is still held after it was let go", i)
			}
		}
		return nil
	})
}
