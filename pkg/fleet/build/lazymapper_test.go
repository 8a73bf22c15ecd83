package build_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet/build"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

func TestLazyRESTMapper(t *testing.T) {
	defer build.SetMinRefresh(100 * time.Millisecond)()
	cfg := fleet.Config(1)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := build.NewLazyRESTMapper(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}

	mapping, err := m.RESTMapping(schema.GroupKind{Kind: "ConfigMap"}, "v1")
	if err != nil || mapping.Resource.Resource != "configmaps" || mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		t.Fatalf("ConfigMap: %+v, %v", mapping, err)
	}
	// No version: the group's preferred one.
	mapping, err = m.RESTMapping(appsv1.SchemeGroupVersion.WithKind("Deployment").GroupKind())
	if err != nil || mapping.Resource != appsv1.SchemeGroupVersion.WithResource("deployments") {
		t.Fatalf("Deployment: %+v, %v", mapping, err)
	}
	mapping, err = m.RESTMapping(schema.GroupKind{Kind: "Namespace"})
	if err != nil || mapping.Scope.Name() != meta.RESTScopeNameRoot {
		t.Fatalf("Namespace: %+v, %v", mapping, err)
	}
	gvk, err := m.KindFor(schema.GroupVersionResource{Group: "apps", Resource: "deployment"})
	if err != nil || gvk.Kind != "Deployment" {
		t.Fatalf("KindFor(deployment) = %v, %v", gvk, err)
	}
	if _, err := m.RESTMapping(schema.GroupKind{Group: "nope.example.com", Kind: "Nothing"}); !meta.IsNoMatchError(err) {
		t.Fatalf("unknown group: %v, want a no-match error", err)
	}
	if _, err := m.RESTMapping(schema.GroupKind{Kind: "Nothing"}, "v1"); !meta.IsNoMatchError(err) {
		t.Fatalf("unknown kind: %v, want a no-match error", err)
	}
	// Only what was asked for was fetched.
	if loaded := build.LoadedGroupVersions(m); len(loaded) != 2 {
		t.Errorf("fetched %v, want v1 and apps/v1 only", loaded)
	}

	// A CRD installed later is found.
	installWidgetCRD(t, cfg)
	fleettest.Eventually(t, 0, func() error {
		mapping, err := m.RESTMapping(schema.GroupKind{Group: "example.com", Kind: "Widget"})
		if err != nil {
			return err
		}
		if mapping.Resource.Resource != "widgets" {
			return fmt.Errorf("Widget maps to %v", mapping.Resource)
		}
		return nil
	})
}

// A cluster built with NewCluster reads and writes through the lazy mapper.
func TestNewClusterUsesTheLazyMapper(t *testing.T) {
	cl, err := build.NewCluster(fleet.Config(1))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "lazy"}}
	if err := cl.GetClient().Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := cl.GetAPIReader().Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
}

func installWidgetCRD(t *testing.T, cfg *rest.Config) {
	t.Helper()
	testbed.InstallCRD(t, cfg, "example.com", "Widget")
}

// A server that accepts connections and never answers fails a lookup at the
// mapper's timeout instead of holding the caller forever.
func TestLazyRESTMapperBoundsLookups(t *testing.T) {
	defer build.SetDiscoveryTimeout(300 * time.Millisecond)()
	cfg := fleet.Config(1)
	cfg.Host = "https://" + testbed.HangingEndpoint(t)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := build.NewLazyRESTMapper(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := m.RESTMapping(schema.GroupKind{Kind: "ConfigMap"}, "v1")
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a lookup against a silent server succeeded")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the lookup is still waiting for a server that never answers")
	}
}

// countingTransport counts the requests of one path.
type countingTransport struct {
	next http.RoundTripper
	path string
	n    *atomic.Int32
}

func (c countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path == c.path {
		c.n.Add(1)
	}
	return c.next.RoundTrip(req)
}

// Issue 22: thousands of clusters sharing a mapper start at once and look up
// the same kind: they share one discovery request of its group version
// instead of sending one each.
func TestLazyRESTMapperLoadsAGroupVersionOnceForConcurrentLookups(t *testing.T) {
	cfg := fleet.Config(1)
	var n atomic.Int32
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return countingTransport{next: rt, path: "/api/v1", n: &n}
	})
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := build.NewLazyRESTMapper(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	const lookups = 200
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, lookups)
	for range lookups {
		wg.Go(func() {
			<-start
			if _, err := m.RESTMapping(schema.GroupKind{Kind: "ConfigMap"}, "v1"); err != nil {
				errs <- err
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := n.Load(); got != 1 {
		t.Fatalf("%d concurrent lookups of ConfigMap sent %d requests for /api/v1, want 1", lookups, got)
	}
}
