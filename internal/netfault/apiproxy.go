package netfault

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// APIProxy is an HTTP proxy in front of an API server that can break the
// lists and watches of one resource: it answers them with 500, or holds them
// open without a byte (a list that never ends, a watch that never sends its
// sync bookmark). It can also silence every watch (SilenceWatches).
// Everything else is forwarded with the proxy's own credentials, so its
// clients need none.
type APIProxy struct {
	srv      *httptest.Server
	resource atomic.Pointer[string]
	mode     atomic.Int32 // 0 forward, apiFail, apiHang
	// silence is closed by SilenceWatches; the watches forwarded meanwhile
	// stop delivering when it is. Replaced by a new one by ForwardWatches.
	silence   atomic.Pointer[chan struct{}]
	silenceMu sync.Mutex

	failed atomic.Int32
	mu     sync.Mutex
	open   map[int]time.Time // streams held open, since when
	next   int
	closed []time.Duration // lifetimes of the held streams that ended
}

const (
	apiFail = 1 + iota
	apiHang
)

// StartAPIProxy starts a proxy to the API server of cfg until Close.
func StartAPIProxy(cfg *rest.Config) (*APIProxy, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("API proxy: %w", err)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("API proxy to %s: %w", target.Host, err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	rp.FlushInterval = -1 // watches stream
	p := &APIProxy{open: map[int]time.Time{}}
	forwarding := make(chan struct{})
	p.silence.Store(&forwarding)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isWatch(r) {
			w = &silenceable{ResponseWriter: w, silence: *p.silence.Load()}
		}
		if !p.matches(r) {
			rp.ServeHTTP(w, r)
			return
		}
		switch p.mode.Load() {
		case apiFail:
			p.failed.Add(1)
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected by the test proxy","code":500}`, http.StatusInternalServerError)
		case apiHang:
			p.hold(r)
		default:
			rp.ServeHTTP(w, r)
		}
	}))
	return p, nil
}

// Close stops the proxy once its requests returned.
func (p *APIProxy) Close() { p.srv.Close() }

// SilenceWatches makes every watch forwarded, open or to come, stop
// delivering: its stream stays open and its client hears nothing more, no
// event and no bookmark, while every other request (/readyz, lists, writes)
// is answered as before. What a watch would have delivered meanwhile is
// lost: a watch silenced stays silent until its client closes it, even
// after ForwardWatches, as a stream stuck between a client and its server
// does.
func (p *APIProxy) SilenceWatches() {
	p.silenceMu.Lock()
	defer p.silenceMu.Unlock()
	ch := *p.silence.Load()
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// ForwardWatches forwards the watches that come from now on again; those
// silenced stay so (see SilenceWatches).
func (p *APIProxy) ForwardWatches() {
	p.silenceMu.Lock()
	defer p.silenceMu.Unlock()
	ch := *p.silence.Load()
	select {
	case <-ch:
		forwarding := make(chan struct{})
		p.silence.Store(&forwarding)
	default:
	}
}

// isWatch reports a watch (or a list streamed through one).
func isWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

// silenceable is the response of a watch: once silence is closed, what the
// server sends is dropped and the client hears nothing more. Its status and
// headers still reach the client, as a server that accepted the watch would
// send them.
type silenceable struct {
	http.ResponseWriter
	silence <-chan struct{}
}

func (s *silenceable) silent() bool {
	select {
	case <-s.silence:
		return true
	default:
		return false
	}
}

func (s *silenceable) WriteHeader(code int) {
	s.ResponseWriter.WriteHeader(code)
	_ = http.NewResponseController(s.ResponseWriter).Flush()
}

func (s *silenceable) Write(b []byte) (int, error) {
	if s.silent() {
		return len(b), nil // dropped: the server goes on, the client hears nothing
	}
	return s.ResponseWriter.Write(b)
}

func (s *silenceable) Flush() {
	if !s.silent() {
		_ = http.NewResponseController(s.ResponseWriter).Flush()
	}
}

// Config returns a config for clients of the proxy.
func (p *APIProxy) Config() *rest.Config {
	return &rest.Config{Host: p.srv.URL, QPS: -1}
}

// FailLists answers every list and watch of resource (a plural name, such as
// "configmaps") with 500.
func (p *APIProxy) FailLists(resource string) { p.resource.Store(&resource); p.mode.Store(apiFail) }

// HangLists holds every list and watch of resource open without answering,
// until its client gives up.
func (p *APIProxy) HangLists(resource string) { p.resource.Store(&resource); p.mode.Store(apiHang) }

// Failed counts the requests answered with 500.
func (p *APIProxy) Failed() int { return int(p.failed.Load()) }

// Streams reports the streams held open now with the age of the oldest, and
// the lifetimes of those that ended.
func (p *APIProxy) Streams() (open int, oldest time.Duration, closed []time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, since := range p.open {
		oldest = max(oldest, time.Since(since))
	}
	return len(p.open), oldest, append([]time.Duration(nil), p.closed...)
}

// matches reports whether r lists or watches the resource: a GET of its
// collection (…/<resource>, not …/<resource>/<name>).
func (p *APIProxy) matches(r *http.Request) bool {
	res := p.resource.Load()
	if res == nil || r.Method != http.MethodGet {
		return false
	}
	return strings.HasSuffix(r.URL.Path, "/"+*res)
}

func (p *APIProxy) hold(r *http.Request) {
	p.mu.Lock()
	id := p.next
	p.next++
	since := time.Now()
	p.open[id] = since
	p.mu.Unlock()
	<-r.Context().Done()
	p.mu.Lock()
	delete(p.open, id)
	p.closed = append(p.closed, time.Since(since))
	p.mu.Unlock()
}
