package clusters

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
// one for every new request.
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
}

// certGen is the transport of one client certificate.
type certGen struct {
	gen       uint64 // the holder's generation last seen with this certificate
	cert, key []byte
	rt        http.RoundTripper
	conns     *connrotation.Dialer
}

// newCertTransport returns the certificate transports of a cluster built
// from cfg.
func newCertTransport(cfg *rest.Config) *certTransport {
	base := rest.CopyConfig(cfg)
	// Only what makes a connection: the authentication wrappers are the
	// cluster's, outside this transport.
	base.BearerToken, base.BearerTokenFile, base.Username, base.Password = "", "", "", ""
	base.Impersonate = rest.ImpersonationConfig{}
	base.UserAgent, base.WrapTransport = "", nil
	base.CertData, base.KeyData = nil, nil
	return &certTransport{base: base}
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
		closeIdle(old.rt)
		time.AfterFunc(retiredConnGrace, old.conns.CloseAll)
	}
	return rt, nil
}

// closeIdle closes the idle connections of the current certificate's
// transport.
func (c *certTransport) closeIdle() {
	if g := c.cur.Load(); g != nil {
		closeIdle(g.rt)
	}
}

// closeIdle closes the idle connections of the transport under rt's
// wrappers (client-go's cache wraps it in one that has no
// CloseIdleConnections).
func closeIdle(rt http.RoundTripper) {
	for {
		if c, ok := rt.(interface{ CloseIdleConnections() }); ok {
			c.CloseIdleConnections()
			return
		}
		w, ok := rt.(utilnet.RoundTripperWrapper)
		if !ok {
			return
		}
		rt = w.WrappedRoundTripper()
	}
}
