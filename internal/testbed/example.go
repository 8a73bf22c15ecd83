package testbed

// The programs under examples/ are run by their tests: start one until the
// test ends, wait for what it prints, create objects in a member.

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
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// ManagerOptions keep an example's manager off fixed ports (mcmanager.Options
// is controller-runtime's manager.Options).
var ManagerOptions = manager.Options{
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

// RunExample runs an example program until the test ends, failing the test
// if it returns an error.
func RunExample(t *testing.T, run func(ctx context.Context, out io.Writer) error) *Output {
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

// WaitForOutput waits until the example has printed want.
func WaitForOutput(t *testing.T, out *Output, want string) {
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
	if err := NewClient(t, cfg).Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

// ConfigMap returns a ConfigMap with one key.
func ConfigMap(namespace, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: map[string]string{"k": "v"}}
}
