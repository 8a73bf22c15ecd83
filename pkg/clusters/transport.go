package clusters

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
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
	gate    *connGate // nil: not a shared pooled transport
}

var _ http.RoundTripper = &boundedTransport{}

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

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}
