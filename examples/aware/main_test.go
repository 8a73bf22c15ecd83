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

var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	testbed.MustProvideAssets()
	fleettest.RunMain(m, 2, func(f *fleettest.Fleet) { fleet = f })
}

// Member 0 is the hub; member 1 joins the fleet after the source exists.
func TestSourcesReachJoiningMembersAndCopiesArePutBack(t *testing.T) {
	provider := fleettest.NewProvider(fleet, fleettest.ProviderOptions{Members: []int{}})
	mgr, err := mcmanager.New(fleet.Config(0), provider, mcmanager.Options{
		Metrics:                server.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := Setup(mgr, provider.ClusterNames); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	hub, member := newClient(t, 0), newClient(t, 1)
	if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}); err != nil {
		t.Fatal(err)
	}
	src := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "limits", Labels: map[string]string{PropagateLabel: "true"}},
		Data:       map[string]string{"max-pods": "110"},
	}
	if err := hub.Create(ctx, src); err != nil {
		t.Fatal(err)
	}

	if err := provider.Add(1); err != nil {
		t.Fatal(err)
	}
	fleettest.Eventually(t, time.Minute, func() error { return copyHas(ctx, member, "110") })

	src.Data["max-pods"] = "250"
	if err := hub.Update(ctx, src); err != nil {
		t.Fatal(err)
	}
	fleettest.Eventually(t, time.Minute, func() error { return copyHas(ctx, member, "250") })

	if err := member.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "limits"}}); err != nil {
		t.Fatal(err)
	}
	fleettest.Eventually(t, time.Minute, func() error { return copyHas(ctx, member, "250") })

	delete(src.Labels, PropagateLabel)
	if err := hub.Update(ctx, src); err != nil {
		t.Fatal(err)
	}
	fleettest.Eventually(t, time.Minute, func() error {
		err := member.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: "limits"}, &corev1.ConfigMap{})
		if err == nil {
			return fmt.Errorf("the copy is still there after the source lost its label")
		}
		return client.IgnoreNotFound(err)
	})
}

func copyHas(ctx context.Context, c client.Client, maxPods string) error {
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: "limits"}, cm); err != nil {
		return err
	}
	if cm.Data["max-pods"] != maxPods || cm.Labels[CopyLabel] != "true" {
		return fmt.Errorf("copy has labels %v data %v, want max-pods=%s", cm.Labels, cm.Data, maxPods)
	}
	return nil
}

func newClient(t *testing.T, member int) client.Client {
	t.Helper()
	c, err := client.New(fleet.Config(member), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
