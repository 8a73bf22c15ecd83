package testbed

import (
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"
)

// Proxy forwards TCP connections to a target while it is up, and closes them
// at once while it is down: a server that comes and goes.
type Proxy struct {
	target   string
	listener net.Listener
	up       atomic.Bool
	hole     atomic.Bool
	attempts atomic.Int32

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

// NewProxy starts a proxy to target (host:port), down, until the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{target: target, listener: l}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.listener.Addr().String() }

// SetUp brings the proxy up or down; connections already forwarded stay.
func (p *Proxy) SetUp(up bool) { p.hole.Store(false); p.up.Store(up) }

// Cut brings the proxy down and closes every connection it forwards: the
// cluster behind it vanishes for its clients at once.
func (p *Proxy) Cut() {
	p.up.Store(false)
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// Blackhole makes the cluster behind the proxy accept connections and never
// answer: connections forwarded so far are closed, new ones are held open
// without a byte, until SetUp(true) or the test ends.
func (p *Proxy) Blackhole() {
	p.hole.Store(true)
	p.Cut()
	p.up.Store(true)
}

// Attempts counts the connections accepted so far.
func (p *Proxy) Attempts() int { return int(p.attempts.Load()) }

func (p *Proxy) accept() {
	for {
		c, err := p.listener.Accept()
		if err != nil {
			return
		}
		p.attempts.Add(1)
		if !p.up.Load() {
			_ = c.Close()
			continue
		}
		if p.hole.Load() {
			p.mu.Lock()
			p.conns = append(p.conns, c) // held, never answered
			p.mu.Unlock()
			continue
		}
		backend, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, backend)
		p.mu.Unlock()
		p.wg.Go(func() { _, _ = io.Copy(backend, c); _ = backend.Close() })
		p.wg.Go(func() { _, _ = io.Copy(c, backend); _ = c.Close() })
	}
}

func (p *Proxy) close() {
	_ = p.listener.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
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
