package clusters_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcfleet "github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// logLines keeps every line a logger wrote.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(_, args string) {
		l.mu.Lock()
		l.lines = append(l.lines, args)
		l.mu.Unlock()
	}, funcr.Options{})
}

// errorsFor returns the error-level lines logged for name (funcr writes a
// "level" first on Info lines only).
func (l *logLines) errorsFor(name multicluster.ClusterName) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if !strings.HasPrefix(line, `"level"=`) && strings.Contains(line, fmt.Sprintf("\"cluster\"=%q", name)) {
			out = append(out, line)
		}
	}
	return out
}

// Issue 40: a cluster handed to the manager with Clusters[T].Add and taken
// back by the application (Remove, or the end of the ctx Add was given) is
// disengaged because it was asked: no line about it is logged at error
// level ("Cluster stopped running", with a stack trace), the level of a
// cluster that dies under the engine.
func TestRemovingAnAddedClusterIsNoError(t *testing.T) {
	logs := &logLines{}
	mgr, err := mcmanager.New(fleet.Config(0), nil, manager.Options{
		Logger:                 logs.logger(),
		Metrics:                server.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := fleettest.RunManager(t, mgr)
	engine := mgr.(mcmanager.FleetOwner).Fleet()
	fleettest.Eventually(t, 0, func() error { return engine.Ready(nil) })
	gone := func(name multicluster.ClusterName) func() error {
		return func() error {
			if _, known := engine.State(name); known {
				return fmt.Errorf("%s is still known to the engine", name)
			}
			return nil
		}
	}

	c := clusters.New[cluster.Cluster]()
	ctx := t.Context()
	if err := c.Add(ctx, "removed", testbed.NewCluster(t, fleet.Config(1)), mgr); err != nil {
		t.Fatal(err)
	}
	if state, _ := engine.State("removed"); state != mcfleet.StateEngaged {
		t.Fatalf("engine state after Add: %q, want engaged", state)
	}
	c.Remove("removed")
	fleettest.Eventually(t, 0, gone("removed"))

	short, cancel := context.WithCancel(ctx)
	if err := c.Add(short, "ended", testbed.NewCluster(t, fleet.Config(1)), mgr); err != nil {
		cancel()
		t.Fatal(err)
	}
	cancel()
	fleettest.Eventually(t, 0, gone("ended"))
	fleettest.Eventually(t, 0, func() error {
		if _, err := mgr.GetCluster(ctx, "ended"); !errors.Is(err, multicluster.ErrClusterNotFound) {
			return fmt.Errorf("GetCluster(ended) after its Add's ctx ended: %v, want ErrClusterNotFound", err)
		}
		return nil
	})

	// The engine returns once every cluster it ran has stopped and its
	// goroutine logged what it had to.
	stop()
	for _, name := range []multicluster.ClusterName{"removed", "ended"} {
		if lines := logs.errorsFor(name); len(lines) > 0 {
			t.Errorf("removing %s, which the application asked for, logged at error level:\n%s", name, strings.Join(lines, "\n"))
		}
	}
}
