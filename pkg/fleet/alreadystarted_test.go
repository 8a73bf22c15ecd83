package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/mcruntime/multicluster-runtime/internal/mctest"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// AlreadyStarted recognises a second Start by the error's identity: ours
// (multicluster.ErrAlreadyStarted, wrapped) and controller-runtime's answer
// from a real cluster started twice; an error that merely says the words is
// a failure like any other.
func TestAlreadyStartedMatchesByIdentity(t *testing.T) {
	if !fleet.AlreadyStarted(fmt.Errorf("cluster %q: %w", "a", multicluster.ErrAlreadyStarted)) {
		t.Error("a wrapped multicluster.ErrAlreadyStarted is not recognised")
	}
	for _, err := range []error{
		nil,
		errors.New("dial tcp: the rollout was already started by another controller"),
		fmt.Errorf("cluster %q: %w", "already started", errors.New("connection refused")),
		errors.New("informer already started, then lost its watch"),
	} {
		if fleet.AlreadyStarted(err) {
			t.Errorf("%v taken for a second Start", err)
		}
	}

	for name, build := range map[string]func() (cluster.Cluster, error){
		"cluster": func() (cluster.Cluster, error) { return cluster.New(members.Config(1)) },
		// The multi-namespace cache wraps the answer with the namespace.
		"cluster with a multi-namespace cache": func() (cluster.Cluster, error) {
			return cluster.New(members.Config(1), func(o *cluster.Options) {
				o.Cache.DefaultNamespaces = map[string]cache.Config{"default": {}, "kube-system": {}}
			})
		},
		// A manager is a cluster.Cluster too, and answers in its own words.
		"manager": func() (cluster.Cluster, error) {
			return manager.New(members.Config(1), manager.Options{Metrics: server.Options{BindAddress: "0"}})
		},
	} {
		t.Run(name, func(t *testing.T) {
			cl, err := build()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			first := make(chan error, 1)
			go func() { first <- cl.Start(ctx) }()
			defer func() {
				cancel()
				if err := <-first; err != nil {
					t.Errorf("first Start: %v", err)
				}
			}()
			if !cl.GetCache().WaitForCacheSync(ctx) {
				t.Fatal("the cache did not sync")
			}
			err = cl.Start(ctx)
			if !fleet.AlreadyStarted(err) {
				t.Errorf("second Start returned %v, not recognised as already started", err)
			}
		})
	}
}

// A second Start of a running engine is refused with an error that matches
// multicluster.ErrAlreadyStarted by identity.
func TestSecondEngineStartIsAlreadyStarted(t *testing.T) {
	e := fleet.New(fleet.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { first <- e.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-first; err != nil {
			t.Errorf("first Start: %v", err)
		}
	}()
	// An engine with nothing to wait for is ready once it has started.
	mctest.Eventually(t, 0, func() error { return e.Ready(nil) })
	if err := e.Start(ctx); !errors.Is(err, multicluster.ErrAlreadyStarted) {
		t.Fatalf("second Start: %v, want an error matching multicluster.ErrAlreadyStarted", err)
	}
}
