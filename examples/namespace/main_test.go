package main

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/mcruntime/multicluster-runtime/internal/testfleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
)

// fleet is the package's fleet of real control planes.
var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	testfleet.RunMain(m, 1, func(f *fleettest.Fleet) { fleet = f })
}

// testOptions keep the manager off fixed ports.
var testOptions = mcmanager.Options{
	Metrics:                server.Options{BindAddress: "0"},
	HealthProbeBindAddress: "0",
}

// output collects what the example prints.
type output struct {
	mu sync.Mutex
	b  strings.Builder
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// start runs the example until the test ends.
func start(t *testing.T, run func(ctx context.Context, out io.Writer) error) *output {
	t.Helper()
	out := &output{}
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

// waitFor waits until the example has printed want.
func waitFor(t *testing.T, out *output, want string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the example did not print %q; it printed:\n%s", want, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// create creates obj in the given member.
func create(t *testing.T, member int, obj client.Object) {
	t.Helper()
	c, err := client.New(fleet.Config(member), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

func configMap(namespace, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: map[string]string{"k": "v"}}
}

// A namespace is a virtual cluster; inside it, objects live in "default".
func TestReconcilesTheVirtualClusters(t *testing.T) {
	out := start(t, func(ctx context.Context, out io.Writer) error {
		return run(ctx, fleet.Config(0), testOptions, out)
	})
	create(t, 0, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}})
	create(t, 0, configMap("team-a", "hello"))
	waitFor(t, out, "reconciled cluster://team-a/default/hello: 1 keys")
}
