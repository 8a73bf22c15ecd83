package testbed

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// APIProxy is an HTTP proxy in front of an API server that can break the
// lists and watches of one resource: it answers them with 500, or holds them
// open without a byte (a list that never ends, a watch that never sends its
// sync bookmark). Everything else is forwarded with the proxy's own
// credentials, so its clients need none.
type APIProxy struct {
	srv      *httptest.Server
	resource atomic.Pointer[string]
	mode     atomic.Int32 // 0 forward, apiFail, apiHang

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

// NewAPIProxy starts a proxy to the API server of cfg until the test ends.
func NewAPIProxy(t testing.TB, cfg *rest.Config) *APIProxy {
	t.Helper()
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	rp.FlushInterval = -1 // watches stream
	p := &APIProxy{open: map[int]time.Time{}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	t.Cleanup(p.srv.Close)
	return p
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
