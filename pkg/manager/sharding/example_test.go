package sharding_test

import (
	"context"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/mcruntime/multicluster-runtime/pkg/manager/sharding"
)

// A replica runs the clusters it owns, each for as long as it holds the fence
// and still owns it. The manager's engine does this for every provider cluster
// when sharding is on; this is the sequence, for one cluster.
func Example() {
	c, err := sharding.New(ctrl.GetConfigOrDie(), sharding.Options{
		Namespace: "my-controller-system",
		Name:      "my-controller",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()
	go func() { _ = c.Start(ctx) }() // or mgr.Add(c)

	const cluster = "prod-eu"
	for ctx.Err() == nil {
		changed := c.Changed()
		if c.Owns(cluster) {
			fenced, release, err := c.Acquire(ctx, cluster)
			if err == nil {
				runUntilDisowned(fenced, c, cluster) // start the cache, engage, ...
				release()                            // only after the cluster stopped
				continue
			}
		}
		select {
		case <-ctx.Done():
		case <-changed:
		}
	}
}

// runUntilDisowned runs a cluster until the fence ends or another replica is
// assigned the cluster, and returns once everything it started has stopped.
func runUntilDisowned(fenced context.Context, c *sharding.Coordinator, cluster string) {
	for {
		changed := c.Changed() // before Owns, so that no change is missed
		if !c.Owns(cluster) {
			return
		}
		select {
		case <-fenced.Done():
			return
		case <-changed:
		}
	}
}
