package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

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

// Issue 40: disengaging a cluster handed to the engine because its provider
// asked (the member removed, the ctx of its Engage ended) is not an error:
// it is logged at info with the reason, never as "Cluster stopped running"
// at error level, with a stack trace. The engine used to take the stop of a
// pre-built cluster it was removing for the cluster dying under it.
func TestRemovingAHandedClusterIsNoError(t *testing.T) {
	logs := &logLines{}
	e, tr := runningEngine(t, fleet.Options{Logger: logs.logger()})
	ctx := context.Background()
	// A subscriber that is slow to engage "engaging": it is removed meanwhile.
	blocked := make(chan struct{})
	e.Subscribe(multicluster.AwareFunc(func(ctx context.Context, name multicluster.ClusterName, _ cluster.Cluster) error {
		if name != "engaging" {
			return nil
		}
		close(blocked)
		<-ctx.Done()
		return ctx.Err()
	}))
	engaging := newMortal(t, testbed.NewCluster(t, members.Config(1)))
	engaging.release()
	e.SetMember(fleet.Member{Name: "engaging", Hash: "1", Cluster: engaging})
	<-blocked
	e.RemoveMember("engaging")
	fleettest.Eventually(t, time.Minute, func() error {
		if engaging.returnedAt().IsZero() {
			return errors.New("the pre-built cluster removed while it was engaged has not stopped")
		}
		return logs.find("Cluster gone", "engaging")
	})

	// A pre-built cluster, which the engine starts, removed by its provider.
	prebuilt := newMortal(t, testbed.NewCluster(t, members.Config(1)))
	prebuilt.release()
	e.SetMember(fleet.Member{Name: "prebuilt", Hash: "1", Cluster: prebuilt})
	fleettest.Eventually(t, time.Minute, engagedWith(tr, "prebuilt", prebuilt))
	e.RemoveMember("prebuilt")
	fleettest.Eventually(t, time.Minute, func() error {
		if prebuilt.returnedAt().IsZero() {
			return errors.New("the removed pre-built cluster has not stopped")
		}
		return logs.find("Cluster gone", "prebuilt")
	})

	// A cluster its provider runs and engages, until the provider's ctx ends.
	adopted := testbed.NewCluster(t, members.Config(1))
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); _ = adopted.Start(runCtx) }()
	t.Cleanup(func() { stopRun(); <-ran })
	if !adopted.GetCache().WaitForCacheSync(runCtx) {
		t.Fatal("the adopted cluster's cache did not sync")
	}
	if err := e.Engage(runCtx, "adopted", adopted); err != nil {
		t.Fatal(err)
	}
	stopRun()
	<-ran
	fleettest.Eventually(t, time.Minute, func() error { return logs.find("Cluster gone", "adopted") })

	for _, name := range []multicluster.ClusterName{"engaging", "prebuilt", "adopted"} {
		if lines := logs.errorsFor(name); len(lines) > 0 {
			t.Errorf("removing %s, which its provider asked for, logged at error level:\n%s", name, strings.Join(lines, "\n"))
		}
	}
}
