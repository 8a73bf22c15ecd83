// Package exampletest runs the example programs under examples/ in their
// tests: start one until the test ends, wait for what it prints, create
// objects in a member.
package exampletest

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
)

// ManagerOptions keep the example's manager off fixed ports.
var ManagerOptions = mcmanager.Options{
	Metrics:                server.Options{BindAddress: "0"},
	HealthProbeBindAddress: "0",
}

// Output collects what an example prints.
type Output struct {
	mu sync.Mutex
	b  strings.Builder
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// Start runs the example until the test ends, failing the test if it
// returns an error.
func Start(t *testing.T, run func(ctx context.Context, out io.Writer) error) *Output {
	t.Helper()
	out := &Output{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("example: %v", err)
		}
	})
	return out
}

// WaitFor waits until the example has printed want.
func WaitFor(t *testing.T, out *Output, want string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the example did not print %q; it printed:\n%s", want, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Create creates obj in the cluster at cfg.
func Create(t *testing.T, cfg *rest.Config, obj client.Object) {
	t.Helper()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

// ConfigMap returns a ConfigMap with one key.
func ConfigMap(namespace, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: map[string]string{"k": "v"}}
}
