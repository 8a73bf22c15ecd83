package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
)

var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	testbed.MustProvideAssets()
	fleettest.RunMain(m, 3, func(f *fleettest.Fleet) { fleet = f })
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
			},
		},
	}
}

// Member 0 is the hub; members 1 and 2 are the fleet. The summary follows
// changes in any member, a member leaving, and a member joining.
func TestSummaryFollowsTheFleet(t *testing.T) {
	provider := fleettest.NewProvider(fleet, fleettest.ProviderOptions{Members: []int{1, 2}})
	mgr, err := mcmanager.New(fleet.Config(0), provider, mcmanager.Options{
		Metrics:                server.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := Setup(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	clients := make([]client.Client, 3)
	for i := range clients {
		if clients[i], err = client.New(fleet.Config(i), client.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := clients[0].Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Summary.Namespace}}); err != nil {
		t.Fatal(err)
	}
	expect := func(want string) {
		t.Helper()
		fleettest.Eventually(t, 30*time.Second, func() error {
			var cm corev1.ConfigMap
			if err := clients[0].Get(ctx, Summary, &cm); err != nil {
				return err
			}
			if got := cm.Data["summary"]; got != want {
				return fmt.Errorf("summary is %q, want %q", got, want)
			}
			return nil
		})
	}

	for _, d := range []*appsv1.Deployment{deployment("web", 2), deployment("api", 3)} {
		if err := clients[1].Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	expect("member-1 deployments=2 replicas=5\nmember-2 deployments=0 replicas=0")

	web := deployment("web", 4)
	if err := clients[2].Create(ctx, web); err != nil {
		t.Fatal(err)
	}
	expect("member-1 deployments=2 replicas=5\nmember-2 deployments=1 replicas=4")
	web.Spec.Replicas = ptr.To[int32](1)
	if err := clients[2].Update(ctx, web); err != nil {
		t.Fatal(err)
	}
	expect("member-1 deployments=2 replicas=5\nmember-2 deployments=1 replicas=1")

	provider.Remove(1)
	expect("member-2 deployments=1 replicas=1")
	if err := provider.Add(1); err != nil {
		t.Fatal(err)
	}
	expect("member-1 deployments=2 replicas=5\nmember-2 deployments=1 replicas=1")
}
