package build_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet/build"
)

// firstStalls holds the first request of each of its paths until the
// request gives up (its client's timeout), as a loaded server does with a
// request queued behind hundreds of others; later requests, and those of
// other paths, go through. It counts the requests of every path.
type firstStalls struct {
	next  http.RoundTripper
	paths map[string]bool // stalled once each

	mu      sync.Mutex
	stalled map[string]int
}

func (f *firstStalls) RoundTrip(req *http.Request) (*http.Response, error) {
	f.mu.Lock()
	f.stalled[req.URL.Path]++
	first := f.stalled[req.URL.Path] == 1 && f.paths[req.URL.Path]
	f.mu.Unlock()
	if first {
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return f.next.RoundTrip(req)
}

func (f *firstStalls) count(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stalled[path]
}

// Issue 42: at 1,000 members starting at once on one loaded API server, a
// member's first discovery request timed out and Clusters.Add failed the
// member on it. The lazy mapper sends a request that timed out once more:
// the group list (a kind asked for without a version: legacy discovery asks
// /api, then /apis) and the group version's resources each stall once here,
// and the lookup succeeds.
func TestLazyRESTMapperRetriesADiscoveryThatTimedOut(t *testing.T) {
	defer build.SetDiscoveryTimeout(500 * time.Millisecond)()
	cfg := fleet.Config(1)
	stalls := &firstStalls{paths: map[string]bool{"/api": true, "/apis/apps/v1": true}, stalled: map[string]int{}}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		stalls.next = rt
		return stalls
	})
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := build.NewLazyRESTMapper(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	mapping, err := m.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"})
	if err != nil {
		t.Fatalf("a lookup whose discovery timed out once failed: %v", err)
	}
	if mapping.Resource.Resource != "deployments" {
		t.Fatalf("Deployment maps to %v, want deployments", mapping.Resource)
	}
	for _, path := range []string{"/api", "/apis/apps/v1"} {
		if n := stalls.count(path); n != 2 {
			t.Errorf("%s was asked %d times, want 2 (one that timed out, one retry)", path, n)
		}
	}
}

// A server that times out every discovery request is asked twice, not
// more: the lookup fails within twice the request bound.
func TestLazyRESTMapperRetriesATimedOutDiscoveryOnce(t *testing.T) {
	defer build.SetDiscoveryTimeout(300 * time.Millisecond)()
	cfg := fleet.Config(1)
	stalls := &firstStalls{stalled: map[string]int{}}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return http.RoundTripper(roundTripFunc(func(req *http.Request) (*http.Response, error) {
			stalls.mu.Lock()
			stalls.stalled[req.URL.Path]++
			stalls.mu.Unlock()
			<-req.Context().Done()
			return nil, req.Context().Err()
		}))
	})
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := build.NewLazyRESTMapper(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.RESTMapping(schema.GroupKind{Kind: "ConfigMap"}, "v1"); err == nil {
		t.Fatal("a lookup against a server that always times out succeeded")
	}
	if n := stalls.count("/api/v1"); n != 2 {
		t.Fatalf("/api/v1 was asked %d times, want 2", n)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
