package netfault

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
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
	delay    atomic.Int64 // time.Duration added to each chunk forwarded (Slow)
	attempts atomic.Int32
	closing  sync.Once

	mu     sync.Mutex
	conns  map[net.Conn]bool // true: a client's (accepted), false: to the target
	closed bool              // Close began: connections accepted since are closed at once
	wg     sync.WaitGroup
}

// StartProxy starts a proxy to target (host:port), down, until Close.
func StartProxy(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy to %s: %w", target, err)
	}
	p := &Proxy{target: target, listener: l, conns: map[net.Conn]bool{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.listener.Addr().String() }

// SetUp brings the proxy up or down; connections already forwarded stay.
func (p *Proxy) SetUp(up bool) { p.hole.Store(false); p.up.Store(up) }

// Slow delays every chunk of bytes the proxy forwards, either way, by d, on
// connections open and to come: a request and its answer take about 2d
// more (a TLS handshake several times that). Zero or less forwards at once
// again.
func (p *Proxy) Slow(d time.Duration) { p.delay.Store(int64(max(d, 0))) }

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
			if p.closed {
				_ = c.Close()
			} else {
				p.conns[c] = true // held, never answered
			}
			p.mu.Unlock()
			continue
		}
		backend, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_, _ = c.Close(), backend.Close()
			return
		}
		p.conns[c], p.conns[backend] = true, false
		p.mu.Unlock()
		// Either side's close ends both copies: the client's end is
		// forgotten once the server's end is closed too.
		p.wg.Go(func() { p.pipe(backend, c); _ = backend.Close(); p.forget(backend) })
		p.wg.Go(func() { p.pipe(c, backend); _ = c.Close(); p.forget(c) })
	}
}

// pipe copies src to dst until either fails, each chunk after the delay
// Slow set, if any.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := time.Duration(p.delay.Load()); d > 0 {
				time.Sleep(d) // the latency injected, not a wait for a condition
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Close stops the proxy and closes every connection it forwards or holds;
// it returns once they are closed.
func (p *Proxy) Close() {
	p.closing.Do(func() {
		_ = p.listener.Close()
		p.mu.Lock()
		p.closed = true
		for c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
}
