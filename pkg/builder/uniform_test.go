package builder_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// A uniform reconciler sees every ConfigMap of every engaged cluster, once per
// change, under the right cluster name: objects that existed before the
// engagement and objects created after it, in clusters engaged before and
// after the manager started. A disengaged cluster's events stop, and the
// goroutines it used are gone.
func TestUniformReconcilerAcrossTheFleet(t *testing.T) {
	e := newEnv(t)
	rec := e.recorder()
	if err := e.builder().For(&corev1.ConfigMap{}).Complete(rec); err != nil {
		t.Fatal(err)
	}

	for i := 1; i <= 3; i++ {
		testbed.CreateConfigMap(t, e.members[i-1], e.ns, "before", nil)
	}
	e.engage(1)
	e.engage(2)
	fleettest.RunManager(t, e.mgr)
	rec.WaitFor(t, 1, member(1), e.ns, "before")
	rec.WaitFor(t, 1, member(2), e.ns, "before")

	// A cluster engaged while the manager runs is picked up, old objects included.
	baseline := testbed.NumGoroutine()
	e.engage(3)
	rec.WaitFor(t, 1, member(3), e.ns, "before")

	for i := 1; i <= 3; i++ {
		testbed.CreateConfigMap(t, e.members[i-1], e.ns, "after", nil)
	}
	for i := 1; i <= 3; i++ {
		rec.WaitFor(t, 1, member(i), e.ns, "after")
	}

	// Once per change: a later event in every cluster is processed after the
	// earlier ones, by then no object may have been reconciled twice.
	for i := 1; i <= 3; i++ {
		testbed.CreateConfigMap(t, e.members[i-1], e.ns, "barrier", nil)
	}
	for i := 1; i <= 3; i++ {
		rec.WaitFor(t, 1, member(i), e.ns, "barrier")
	}
	for req, n := range rec.Counts() {
		if n != 1 {
			t.Errorf("%s reconciled %d times, want once", req, n)
		}
		if req.ClusterName == "" {
			t.Errorf("request %s has no cluster", req)
		}
	}
	if got, want := len(rec.Counts()), 9; got != want {
		t.Errorf("saw %d distinct requests, want %d: %v", got, want, rec.Counts())
	}

	// Disengage member 3: its new objects are not reconciled any more, and the
	// goroutines engaging it started are gone.
	e.provider.Remove(member(3))
	fleettest.Eventually(t, 0, func() error {
		if _, err := e.mgr.GetCluster(context.Background(), member(3)); err == nil {
			return fmt.Errorf("%s still engaged", member(3))
		}
		return nil
	})
	testbed.CreateConfigMap(t, e.members[2], e.ns, "after-disengage", nil)
	testbed.CreateConfigMap(t, e.members[0], e.ns, "after-disengage", nil)
	rec.WaitFor(t, 1, member(1), e.ns, "after-disengage")
	if n := rec.Count(member(3), e.ns, "after-disengage"); n != 0 {
		t.Errorf("disengaged cluster's object reconciled %d times", n)
	}
	testbed.WaitForGoroutines(t, baseline, 30*time.Second)
}

// A controller built after clusters were engaged is engaged with all of them.
func TestControllerAddedAfterEngagement(t *testing.T) {
	e := newEnv(t)
	for i := 1; i <= 3; i++ {
		testbed.CreateConfigMap(t, e.members[i-1], e.ns, "cm", nil)
		e.engage(i)
	}
	fleettest.RunManager(t, e.mgr)
	fleettest.Eventually(t, 0, func() error {
		if n := len(e.provider.ClusterNames()); n != 3 {
			return fmt.Errorf("%d clusters engaged, want 3", n)
		}
		return nil
	})

	rec := e.recorder()
	if err := e.builder().For(&corev1.ConfigMap{}).Complete(rec); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		rec.WaitFor(t, 1, member(i), e.ns, "cm")
	}
}
