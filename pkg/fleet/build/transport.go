package build

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/watchlive"
)

// DefaultRequestTimeout bounds every request of a cluster built by
// NewCluster, except long-running ones (watches, log follows, upgraded
// connections such as exec and port-forward), unless WithRequestTimeout says
// otherwise. A member that accepts connections and never answers then holds a
// reconcile for at most this long, instead of until the operating system
// gives up on the connection. Healthy API servers answer in milliseconds; the
// bound is generous for large lists, which informers stream as watches.
const DefaultRequestTimeout = 15 * time.Second

// WithRequestTimeout sets the bound of every request a cluster built by
// NewCluster makes, except long-running ones (see DefaultRequestTimeout). A
// context deadline shorter than d still applies. Zero or less removes the
// bound. It configures the cluster's HTTP client: NewCluster's, or one an
// earlier option set; with plain cluster.New and no HTTP client it has
// nothing to configure. An option that replaces Options.HTTPClient afterwards
// replaces the bound too.
func WithRequestTimeout(d time.Duration) cluster.Option {
	return func(o *cluster.Options) {
		if t := boundedTransportOf(o); t != nil {
			t.timeout = d
		}
	}
}

// WithClientRateLimits limits the requests of a cluster built by NewCluster
// to qps per second, with bursts of burst. By default, like
// controller-runtime's host client, there is no client-side limit: the API
// server's priority and fairness protects it. qps zero or less removes the
// limit. Like WithRequestTimeout, it only applies to clusters built by
// NewCluster.
func WithClientRateLimits(qps float32, burst int) cluster.Option {
	return func(o *cluster.Options) {
		t := boundedTransportOf(o)
		if t == nil {
			return
		}
		if qps <= 0 {
			t.limiter = nil
			return
		}
		t.limiter = flowcontrol.NewTokenBucketRateLimiter(qps, max(burst, 1))
	}
}

// boundedTransportOf returns the bounded transport of o's HTTP client,
// wrapping a client set by another option in one (with no bound yet). Without
// an HTTP client (cluster.New builds one only after the options, from the
// config) there is nothing to configure: use NewCluster.
func boundedTransportOf(o *cluster.Options) *boundedTransport {
	if o.HTTPClient == nil {
		return nil
	}
	if t, ok := o.HTTPClient.Transport.(*boundedTransport); ok {
		return t
	}
	next := o.HTTPClient.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	hc := *o.HTTPClient
	t := &boundedTransport{next: next}
	hc.Transport = t
	o.HTTPClient = &hc
	return t
}

// boundedTransport bounds and optionally rate-limits a cluster's requests.
type boundedTransport struct {
	next    http.RoundTripper
	timeout time.Duration
	limiter flowcontrol.RateLimiter
	gate    *connGate          // nil: not a shared pooled transport
	live    *watchlive.Tracker // follows the cluster's watches (nil: not followed)
}

var (
	_ http.RoundTripper           = &boundedTransport{}
	_ utilnet.RoundTripperWrapper = &boundedTransport{}
)

// WrappedRoundTripper lets a walk of the cluster's transports (the close of
// its own connections when it stops, utilnet.CloseIdleConnectionsFor) reach
// what is below.
func (t *boundedTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

// CloseIdleConnections passes on to the transports below: http.Client's
// CloseIdleConnections calls it (the engine's, once a cluster stopped).
func (t *boundedTransport) CloseIdleConnections() { utilnet.CloseIdleConnectionsFor(t.next) }

func (t *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	// Throttled before the bound starts, as client-go does: a client held
	// back by its own rate limit does not time out before it has asked.
	if t.limiter != nil {
		if err := t.limiter.Wait(req.Context()); err != nil {
			return nil, err
		}
	}
	// The bound starts before the gate: a request held behind a first
	// connection stuck in its TLS handshake (10 s in client-go's transport)
	// gives up at its own bound, not that long after it.
	var cancel context.CancelFunc // nil: unbounded
	if t.timeout > 0 && !longRunning(req) {
		var ctx context.Context
		ctx, cancel = context.WithTimeout(req.Context(), t.timeout)
		req = req.WithContext(ctx)
	}
	if g := t.gate; g != nil && !g.open.Load() {
		first, err := g.enter(req.Context())
		if err != nil {
			if cancel != nil {
				cancel()
			}
			return nil, fmt.Errorf("waiting for the first connection to %s: %w", req.URL.Host, err)
		}
		if first {
			// Opened once connected, or once the request failed to connect.
			defer g.release()
			req = g.traced(req)
		}
	}
	resp, err := t.next.RoundTrip(req)
	if cancel == nil {
		if err == nil && t.live != nil && isWatch(req) && resp.StatusCode/100 == 2 {
			resp.Body = t.live.Watch(resp.Body) // see fleet.HealthOptions.WatchSilence
		}
		return resp, err
	}
	if err != nil {
		cancel()
		return nil, err
	}
	// The bound covers reading the body too: release it when the caller is done.
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// longRunning reports requests that legitimately stay open: watches (and the
// streaming lists informers make through them), followed logs, and
// connection upgrades (exec, attach, port-forward).
func longRunning(req *http.Request) bool {
	q := req.URL.Query()
	return q.Get("watch") == "true" || q.Get("watch") == "1" || q.Get("follow") == "true" ||
		req.Header.Get("Upgrade") != "" || req.Header.Get("Connection") == "Upgrade"
}

// isWatch reports a watch (or a list informers stream through one).
func isWatch(req *http.Request) bool {
	if !strings.Contains(req.URL.RawQuery, "watch=") {
		return false // most requests: no query to parse
	}
	w := req.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// WithResponseCompression is a cluster option that lets a cluster built by
// NewCluster ask its API server for compressed responses, as client-go does
// by default. NewCluster asks for none: the API server compresses watch
// streams, and each open watch then holds a gzip reader with its 32 KB
// window and Huffman tables, about 44 KB per watched type per cluster,
// whether the watch carries an event a day or a thousand; across a fleet
// that is more than the objects of a small member. Without compression the
// same events cross the network uncompressed, several times the bytes for
// JSON and less for protobuf, which controller-runtime asks for built-in
// types: turn it back on for members behind a slow or metered link.
//
// It applies to NewCluster's HTTP client: with an HTTP client of another
// option, that client decides. Other builders of clusters compress anyway:
// there it changes nothing.
func WithResponseCompression() cluster.Option {
	return setFlag(func(f *buildFlags) { f.compression = true })
}

// uncompressedDefault is http.DefaultTransport asking for no compression,
// shared by every cluster whose config needs no transport of its own (plain
// HTTP without TLS options), for which client-go returns
// http.DefaultTransport and ignores DisableCompression.
var uncompressedDefault = sync.OnceValue(func() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableCompression = true
	return t
})

// transportFor returns the HTTP client client-go builds for cfg and the
// transport under its wrappers, honouring cfg.DisableCompression where
// client-go does not: for a config that needs no transport of its own it
// uses http.DefaultTransport, which compresses.
//
// creds, if not nil, sets every request's credentials (see credentials.wrap).
func transportFor(cfg *rest.Config, creds *Holder) (*http.Client, http.RoundTripper, error) {
	c := rest.CopyConfig(cfg)
	if creds != nil {
		// client-go's transport below holds the certificate the cluster is
		// built with, shared as client-go shares it with every client of
		// the same configuration; a rotated one gets a transport of its own
		// (certTransport).
		c.WrapTransport = transport.Wrappers(c.WrapTransport, creds.wrapperFor(c))
	}
	if c.DisableCompression {
		// First: the config's own wrappers wrap the transport it picked.
		c.WrapTransport = transport.Wrappers(func(rt http.RoundTripper) http.RoundTripper {
			if rt == http.DefaultTransport {
				return uncompressedDefault()
			}
			return rt
		}, c.WrapTransport)
	}
	base, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, nil, fmt.Errorf("creating HTTP client: %w", err)
	}
	next := base.Transport
	if next == nil {
		next = http.DefaultTransport // http.DefaultClient: no wrapper ran
		if c.DisableCompression {
			next = uncompressedDefault()
		}
	}
	return base, next, nil
}

// compress turns compression back on for a cluster NewCluster is building:
// its config and, if the options left NewCluster's HTTP client in place, the
// transport under its bounded transport (client-go caches transports by
// their settings, compression among them, so clusters asking for it share
// theirs as the others share theirs).
func compress(cfg *rest.Config, creds *Holder, o *cluster.Options, bounded *boundedTransport) error {
	cfg.DisableCompression = false
	if o.HTTPClient == nil || o.HTTPClient.Transport != bounded {
		return nil // another option's HTTP client decides
	}
	_, next, err := transportFor(cfg, creds)
	if err != nil {
		return err
	}
	bounded.next, bounded.gate = next, connGateFor(next, cfg.Host)
	return nil
}
