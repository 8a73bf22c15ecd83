package build

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
)

// retiredConnGrace is how long the connections made with a client
// certificate that was rotated away stay open for the streams they carry.
// Informers end their watches within 10 minutes (client-go's reflector asks
// for a timeout of 5 to 10) and watch again, on connections with the new
// certificate; what is still open after the grace (a followed log, an exec
// session) is closed.
var retiredConnGrace = 15 * time.Minute

// certTransport is the transport of one cluster whose client certificate
// rotates in place: one client-go transport per certificate, the current
// one for every new request. The first certificate's is client-go's own,
// shared as client-go shares it with every client of the same config, so
// that a cluster that never rotates costs what it did; each certificate
// rotated in gets a transport of its own.
//
// A certificate is presented when a connection is made, and HTTP/2 carries
// every request to a server on one connection: with a certificate callback
// and the idle connections closed, new requests would still travel, with
// the old certificate, on the connection the informers' watches keep busy,
// for as long as any watch is open. Closing every connection instead, as
// client-go does for an exec plugin's new certificate, cuts the watches: a
// watch cut in its first second with no event makes its informer list
// again. So a new certificate gets a transport of its own, which new
// requests use at once; the old transport keeps its open streams, its idle
// connections are closed, and the rest after retiredConnGrace.
type certTransport struct {
	base *rest.Config // the cluster's config without its credentials
	cur  atomic.Pointer[certGen]
	mu   sync.Mutex // held while a transport is built
	// retired are the dialers of certificates rotated away, closed after
	// retiredConnGrace or when the cluster stops; guarded by mu.
	retired []*connrotation.Dialer
}

// certGen is the transport of one client certificate.
type certGen struct {
	gen       uint64 // the holder's generation last seen with this certificate
	cert, key []byte
	rt        http.RoundTripper
	conns     *connrotation.Dialer // nil for client-go's shared transport of the first certificate
}

// newCertTransport returns the certificate transports of a cluster built
// from cfg, whose certificate is s's: until it rotates, requests go through
// shared, client-go's transport of the cluster's config, which holds it
// (and which client-go shares with every client of the same config).
func newCertTransport(cfg *rest.Config, shared http.RoundTripper, s *credentialState) *certTransport {
	base := rest.CopyConfig(cfg)
	// Only what makes a connection: the authentication wrappers are the
	// cluster's, outside this transport.
	base.BearerToken, base.BearerTokenFile, base.Username, base.Password = "", "", "", ""
	base.Impersonate = rest.ImpersonationConfig{}
	base.UserAgent, base.WrapTransport = "", nil
	base.CertData, base.KeyData = nil, nil
	c := &certTransport{base: base}
	c.cur.Store(&certGen{gen: s.gen, cert: s.who.CertData, key: s.who.KeyData, rt: shared})
	return c
}

// forState returns the transport of s's client certificate, made on first
// use.
func (c *certTransport) forState(s *credentialState) (http.RoundTripper, error) {
	if g := c.cur.Load(); g != nil && g.gen == s.gen {
		return g.rt, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.cur.Load()
	if old != nil && bytes.Equal(old.cert, s.who.CertData) && bytes.Equal(old.key, s.who.KeyData) {
		// Another rotation of the holder, not of its certificate.
		c.cur.Store(&certGen{gen: s.gen, cert: old.cert, key: old.key, rt: old.rt, conns: old.conns})
		return old.rt, nil
	}
	conns := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	cfg := rest.CopyConfig(c.base)
	cfg.CertData, cfg.KeyData = s.who.CertData, s.who.KeyData
	// A dialer of its own: client-go's transport cache gives this
	// certificate a transport that no other cluster shares.
	cfg.Dial = conns.DialContext
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the transport of the rotated client certificate: %w", err)
	}
	c.cur.Store(&certGen{gen: s.gen, cert: s.who.CertData, key: s.who.KeyData, rt: rt, conns: conns})
	if old != nil {
		utilnet.CloseIdleConnectionsFor(old.rt)
		if old.conns != nil { // nil: client-go's shared transport, whose connections are not only ours
			c.retired = append(c.retired, old.conns)
			time.AfterFunc(retiredConnGrace, old.conns.CloseAll)
		}
	}
	return rt, nil
}

// closeAll closes every connection of the cluster's certificates, once the
// cluster stopped: its transports are its own (see forState), so nothing
// else would reuse them, and a watch that was still ending when the cache
// stopped would otherwise keep its connection open until the server ends
// it.
func (c *certTransport) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.cur.Load(); g != nil && g.conns != nil {
		g.conns.CloseAll()
	}
	for _, d := range c.retired {
		d.CloseAll()
	}
	c.retired = nil
}

// closeConnections closes the connections of a cluster that stopped, whose
// transport is rt: every connection of its certificate transports, if any
// (see certTransport.closeAll), and the idle connections of the transports
// below, client-go's shared one among them (a connection that other clusters
// of the same TLS configuration use is not idle). Each wrapper of ours on
// the way is a utilnet.RoundTripperWrapper, so that the walk reaches them.
//
// The idle connections are closed twice: at once, and again after
// streamsEnd. The watches of the cluster's informers were cancelled by its
// context, and an HTTP/2 stream cancelled that way is let go by the
// connection's own goroutines a moment after its informer returned; the
// connection it was on is not idle until then, and would stay open for
// client-go's idle timeout (90 s).
func closeConnections(rt http.RoundTripper) {
	for next := rt; next != nil; {
		if t, ok := next.(*credentialsTransport); ok {
			if t.certs != nil {
				t.certs.closeAll()
			}
			break
		}
		w, ok := next.(utilnet.RoundTripperWrapper)
		if !ok {
			break
		}
		next = w.WrappedRoundTripper()
	}
	if rt == nil {
		return
	}
	utilnet.CloseIdleConnectionsFor(rt)
	time.AfterFunc(streamsEnd, func() { utilnet.CloseIdleConnectionsFor(rt) })
}

// streamsEnd bounds how long the cancelled streams of a stopped cluster take
// to end (see closeConnections): microseconds on an idle machine.
const streamsEnd = time.Second

// closeIdle closes the idle connections of the current certificate's
// transport.
func (c *certTransport) closeIdle() {
	if g := c.cur.Load(); g != nil {
		utilnet.CloseIdleConnectionsFor(g.rt)
	}
}
