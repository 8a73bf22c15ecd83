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
// at once while it is down: a server that comes and goes. It counts the
// connections its clients hold open (Open): TLS passes through it untouched,
// so each is one connection of a client's pool to the server behind.
type Proxy struct {
	target   string
	listener net.Listener
	up       atomic.Bool
	hole     atomic.Bool
	attempts atomic.Int32

	mu    sync.Mutex
	conns map[net.Conn]bool // true: a client's (accepted), false: to the target
	wg    sync.WaitGroup
}

// NewProxy starts a proxy to target (host:port), down, until the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{target: target, listener: l, conns: map[net.Conn]bool{}}
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
	p.conns = map[net.Conn]bool{}
	p.mu.Unlock()
	for c := range conns {
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

// Open counts the client connections forwarded (or held, black-holed) and
// not yet closed by either side: the connections the proxy's clients keep
// to the server behind it. A test of connection reuse puts one proxy in
// front of a member (Proxied) and bounds Open, since a connection a client
// stopped using stays open until its idle timeout (90 s in client-go) or
// until the client closes it.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, client := range p.conns {
		if client {
			n++
		}
	}
	return n
}

// forget drops c, closed, from the connections counted.
func (p *Proxy) forget(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

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
			p.conns[c] = true // held, never answered
			p.mu.Unlock()
			continue
		}
		backend, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[backend] = true, false
		p.mu.Unlock()
		// Either side's close ends both copies: the client's end is
		// forgotten once the server's end is closed too.
		p.wg.Go(func() { _, _ = io.Copy(backend, c); _ = backend.Close(); p.forget(backend) })
		p.wg.Go(func() { _, _ = io.Copy(c, backend); _ = c.Close(); p.forget(c) })
	}
}

func (p *Proxy) close() {
	_ = p.listener.Close()
	p.mu.Lock()
	for c := range p.conns {
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
