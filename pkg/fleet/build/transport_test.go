package build_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet/build"
)

// hangingConfig points at a server that accepts connections and never answers.
func hangingConfig(t *testing.T) *rest.Config {
	return &rest.Config{Host: "http://" + testbed.HangingEndpoint(t)}
}

// getWithin runs a direct (uncached) Get and fails the test if it has not
// returned within limit.
func getWithin(t *testing.T, c client.Reader, limit time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		done <- c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "x"}, &corev1.ConfigMap{})
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("a request to a silent member did not return within %s", limit)
		return nil
	}
}

func TestRequestsToASilentMemberAreBounded(t *testing.T) {
	cl, err := build.NewCluster(hangingConfig(t), build.WithRequestTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// The mapper is lazy: the first request goes to discovery, bounded too.
	if err := getWithin(t, cl.GetAPIReader(), 20*time.Second); err == nil {
		t.Fatal("a Get from a silent member succeeded")
	}
	if err := getWithin(t, cl.GetClient(), 20*time.Second); err == nil {
		t.Fatal("a Get from a silent member succeeded")
	}
}

func TestDefaultRequestTimeoutBoundsRequests(t *testing.T) {
	cl, err := build.NewCluster(hangingConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = getWithin(t, cl.GetAPIReader(), build.DefaultRequestTimeout+30*time.Second)
	if err == nil {
		t.Fatal("a Get from a silent member succeeded")
	}
	t.Logf("a Get from a silent member returned after %s: %v", time.Since(start).Round(time.Millisecond), err)
}

func TestWatchesAreNotCutByTheRequestTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	cl, err := build.NewCluster(fleet.Config(0), build.WithRequestTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	// A plain request through the cluster's HTTP client succeeds.
	base := strings.TrimSuffix(fleet.Config(0).Host, "/")
	resp, err := cl.GetHTTPClient().Get(base + "/api/v1/namespaces/default/configmaps")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("list: %s", resp.Status)
	}
	// A watch stays open well past the request timeout.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=60", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err = cl.GetHTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	read := make(chan error, 1)
	go func() {
		buf := make([]byte, 1)
		for {
			if _, err := resp.Body.Read(buf); err != nil {
				read <- err
				return
			}
		}
	}()
	select {
	case err := <-read:
		t.Fatalf("the watch ended after less than %s: %v", 10*timeout, err)
	case <-time.After(10 * timeout):
	}
	cancel()
	if err := <-read; err == nil || !errors.Is(err, context.Canceled) {
		t.Logf("watch ended with %v", err)
	}
}
