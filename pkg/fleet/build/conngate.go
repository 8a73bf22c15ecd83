package build

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"weak"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// connGate holds back the requests to one server through one shared
// transport while the first of them connects. Clusters that reach the same
// API server with the same TLS configuration share client-go's transport
// (kcp workspaces, virtual clusters, a fleet's namespaces on one endpoint):
// when thousands of them start at once with no connection open, the
// transport dials and completes a TLS handshake for every request waiting,
// keeps one HTTP/2 connection and closes the rest. At 5,000 such clusters,
// handshakes were a third to a half of the process's CPU at start-up. Held
// back until the first request has its connection, the others share it.
//
// A request waits at the gate within its own bound: the bounded transport
// sets its timeout before the gate, and the wait ends with the request's
// context.
//
// Once open, a gate costs a request one atomic load. It opens for good: a
// transport that loses its connections later dials again as it would
// without it.
type connGate struct {
	open       atomic.Bool
	connecting atomic.Bool
	ready      chan struct{}
	once       sync.Once
}

type connGateKey struct {
	transport http.RoundTripper
	host      string
}

// connGates find the gate of a shared transport and host, for as long as a
// cluster holds it: a cluster's bounded transport holds its gate, the table
// only a weak pointer to it, and the entry goes once the gate is collected
// (see forgetGate). The transport in the key is then let go too, and with it
// the TLS configuration and client key client-go's cache would have
// collected: the table holds what the clusters that run now use, not what
// every cluster ever built used. The next cluster of a transport whose gate
// went gets a new one, which its first request opens at once if the
// transport still has a connection.
var connGates = struct {
	sync.Mutex
	m map[connGateKey]weak.Pointer[connGate]
}{m: map[connGateKey]weak.Pointer[connGate]{}}

// connGateFor returns the gate of the pooled transport under rt, for host;
// nil if rt does not end in an *http.Transport (nothing to share) or host
// cannot be read.
func connGateFor(rt http.RoundTripper, host string) *connGate {
	for {
		w, ok := rt.(utilnet.RoundTripperWrapper)
		if !ok {
			break
		}
		rt = w.WrappedRoundTripper()
	}
	if _, ok := rt.(*http.Transport); !ok {
		return nil
	}
	if !strings.Contains(host, "://") {
		host = "https://" + host // as client-go reads a bare host:port
	}
	u, err := url.Parse(host)
	if err != nil || u.Host == "" {
		return nil
	}
	key := connGateKey{rt, u.Host}
	connGates.Lock()
	defer connGates.Unlock()
	if g := connGates.m[key].Value(); g != nil {
		return g
	}
	g := &connGate{ready: make(chan struct{})}
	wp := weak.Make(g)
	connGates.m[key] = wp
	runtime.AddCleanup(g, forgetGate, gateEntry{key, wp})
	return g
}

// gateEntry is what forgetGate needs of a collected gate's entry.
type gateEntry struct {
	key  connGateKey
	gate weak.Pointer[connGate]
}

// forgetGate deletes the entry of a gate that was collected, unless a new
// gate took its place in the meantime.
func forgetGate(e gateEntry) {
	connGates.Lock()
	defer connGates.Unlock()
	if connGates.m[e.key] == e.gate {
		delete(connGates.m, e.key)
	}
}

// enter lets the first request through, and holds the others until it has
// its connection or has failed; first reports which it was.
func (g *connGate) enter(ctx context.Context) (first bool, err error) {
	if g.connecting.CompareAndSwap(false, true) {
		return true, nil
	}
	select {
	case <-g.ready:
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// traced returns req with a trace that opens the gate once its connection
// is established.
func (g *connGate) traced(req *http.Request) *http.Request {
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { g.release() }}
	return req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
}

// release opens the gate for good.
func (g *connGate) release() {
	g.once.Do(func() {
		g.open.Store(true)
		close(g.ready)
	})
}
