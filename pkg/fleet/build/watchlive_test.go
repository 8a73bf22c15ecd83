package build_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/watchlive"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet/build"
)

// The engine judges a cluster on its watches through what NewCluster's
// HTTP client saw of them: every watch the cache opens is followed, and each
// event it receives counts; other requests do not.
func TestNewClusterFollowsItsWatches(t *testing.T) {
	cl, err := build.NewCluster(fleet.Config(0))
	if err != nil {
		t.Fatal(err)
	}
	live := watchlive.Of(cl)
	if live == nil {
		t.Fatal("a cluster built by NewCluster does not follow its watches")
	}
	// A request that is no watch is not followed.
	if err := cl.GetAPIReader().List(context.Background(), &corev1.ConfigMapList{}, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	if _, watched := live.Silence(); watched {
		t.Fatal("a list counted as a watch")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cl.Start(ctx) }()
	defer func() { cancel(); <-done }()
	inf, err := cl.GetCache().GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	if !cl.GetCache().WaitForCacheSync(ctx) || !inf.HasSynced() {
		t.Fatal("cache did not sync")
	}
	if open, _ := live.Open(); open < 1 {
		t.Fatalf("open watches = %d after the informer synced, want at least 1", open)
	}
	// Silent while nothing happens (no bookmark within a test's time)...
	waitUntil(t, func() bool { d, _ := live.Silence(); return d >= 200*time.Millisecond })
	// ...until an event arrives.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "watchlive-"}}
	if err := cl.GetClient().Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.GetClient().Delete(context.Background(), cm) })
	waitUntil(t, func() bool { d, _ := live.Silence(); return d < 200*time.Millisecond })

	// An option that replaces the HTTP client replaces what follows the
	// watches: such a cluster is not judged on them.
	other, err := build.NewCluster(fleet.Config(0), func(o *cluster.Options) { o.HTTPClient = nil })
	if err != nil {
		t.Fatal(err)
	}
	if watchlive.Of(other) != nil {
		t.Fatal("a cluster with another HTTP client claims to follow its watches")
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s")
		}
	}
}
