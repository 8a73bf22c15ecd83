package testbed

import (
	"net"
	"net/url"
	"sync"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/mcruntime/multicluster-runtime/internal/netfault"
)

// Proxy forwards TCP connections to a target while it is up (see
// netfault.Proxy): a server that comes and goes, black-holes or slows down.
type Proxy = netfault.Proxy

// NewProxy starts a proxy to target (host:port), down, until the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	p, err := netfault.StartProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
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

// Proxied returns a copy of cfg that reaches its server through a new Proxy,
// up, and the proxy: the test can then cut the cluster off its clients.
func Proxied(t testing.TB, cfg *rest.Config) (*rest.Config, *Proxy) {
	t.Helper()
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy := NewProxy(t, u.Host)
	proxy.SetUp(true)
	out := rest.CopyConfig(cfg)
	out.Host = "https://" + proxy.Addr()
	return out, proxy
}

// APIProxy is an HTTP proxy in front of an API server that breaks lists and
// watches on demand (see netfault.APIProxy).
type APIProxy = netfault.APIProxy

// NewAPIProxy starts a proxy to the API server of cfg until the test ends.
func NewAPIProxy(t testing.TB, cfg *rest.Config) *APIProxy {
	t.Helper()
	p, err := netfault.StartAPIProxy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}
