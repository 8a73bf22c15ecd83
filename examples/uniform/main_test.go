package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
)

// snippet:testing-main
// fleet is shared by the package's tests: two real control planes.
var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	testbed.MustProvideAssets() // in your project: set KUBEBUILDER_ASSETS (setup-envtest) instead
	fleettest.RunMain(m, 2, func(f *fleettest.Fleet) { fleet = f })
}

// end-snippet

// snippet:testing-test
func TestBaselineInEveryNamespaceOfEveryCluster(t *testing.T) {
	provider := fleettest.NewProvider(fleet, fleettest.ProviderOptions{})
	mgr, err := mcmanager.New(fleet.Config(0), provider, mcmanager.Options{
		Metrics:                server.Options{BindAddress: "0"}, // tests must not fight over ports
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := Setup(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	// A namespace created in member 1 only gets its baseline in member 1.
	member1 := newClient(t, 1)
	if err := member1.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}); err != nil {
		t.Fatal(err)
	}
	for i := range fleet.Len() {
		fleettest.Eventually(t, time.Minute, func() error { return hasBaseline(ctx, newClient(t, i), "default") })
	}
	fleettest.Eventually(t, time.Minute, func() error { return hasBaseline(ctx, member1, "team-a") })

	// Deleting the baseline brings it back.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: BaselineName}}
	if err := member1.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	fleettest.Eventually(t, time.Minute, func() error { return hasBaseline(ctx, member1, "team-a") })
}

// end-snippet

func newClient(t *testing.T, member int) client.Client {
	t.Helper()
	c, err := client.New(fleet.Config(member), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func hasBaseline(ctx context.Context, c client.Client, namespace string) error {
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: BaselineName}, cm); err != nil {
		return err
	}
	if cm.Data["owner"] != Baseline["owner"] {
		return fmt.Errorf("%s/%s has data %v", namespace, BaselineName, cm.Data)
	}
	return nil
}
