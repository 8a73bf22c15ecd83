// Package pausetest checks, for each inventory provider's tests, that a pause
// set on the provider's source object holds a cluster's reconciles without
// rebuilding it, and that removing it reconciles each held key once.
package pausetest

import (
	"context"
	"fmt"
	"k8s.io/client-go/rest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/inventory"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Controller adds to mgr a controller of the provider's clusters' ConfigMaps
// that records its reconciles in rec. Call it before mgr runs.
func Controller(t testing.TB, mgr mcmanager.Manager, rec *fleettest.Recorder) {
	t.Helper()
	if err := mcbuilder.ControllerManagedBy(mgr).Named("pause").
		For(&corev1.ConfigMap{}, mcbuilder.WithEngageWithLocalCluster(false), mcbuilder.WithEngageWithProviderClusters(true)).
		Complete(rec); err != nil {
		t.Fatal(err)
	}
}

// Scenario is one pause by annotation, on a running manager whose
// Controller records in Recorder, limited to Namespace of the member.
type Scenario struct {
	Manager  mcmanager.Manager
	Recorder *fleettest.Recorder
	Tracker  *fleettest.Tracker // added to Manager: counts engagements
	Cluster  multicluster.ClusterName
	// Member is an admin client of the cluster; Namespace exists there and
	// is the Recorder's.
	Member    client.Client
	Namespace string
	// SetPaused sets or removes the pause on the provider's source object.
	SetPaused func(t testing.TB, paused bool)
	// MemberConfig, if set, reaches the member's API server as an admin:
	// Run then also checks, from its metrics, that neither the pause nor
	// the resume listed the member's ConfigMaps again. Leave it unset
	// where other tests' clusters list the same server meanwhile.
	MemberConfig *rest.Config
}

// Run engages the cluster (the source object must exist), pauses it by its
// source, changes a ConfigMap and creates another while paused, resumes it,
// and checks: the cluster stays engaged and is never engaged again, nothing
// is reconciled while paused, and each changed key is reconciled once after.
func (s Scenario) Run(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	engine := s.Manager.(mcmanager.FleetOwner).Fleet()
	cm := testbed.CreateConfigMap(t, s.Member, s.Namespace, "before", nil)
	s.Recorder.WaitFor(t, 1, s.Cluster, s.Namespace, "before")
	engaged := func() error {
		if st, _ := engine.State(s.Cluster); st != fleet.StateEngaged {
			return fmt.Errorf("cluster %q is %s, want engaged", s.Cluster, st)
		}
		return nil
	}
	pausedIs := func(want bool) func() error {
		return func() error {
			if p, _ := engine.Snapshot(s.Cluster); p.Paused != want {
				return fmt.Errorf("cluster %q paused %v, want %v", s.Cluster, p, want)
			}
			return engaged()
		}
	}

	var lists float64
	if s.MemberConfig != nil {
		lists = testbed.ListsServed(t, s.MemberConfig, "configmaps")
	}
	s.SetPaused(t, true)
	fleettest.Eventually(t, 30*time.Second, pausedIs(true))
	cm.Data = map[string]string{"changed": "while paused"}
	if err := s.Member.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	testbed.CreateConfigMap(t, s.Member, s.Namespace, "during", nil)
	fleettest.Consistently(t, 2*time.Second, func() error {
		if n := s.Recorder.Count(s.Cluster, s.Namespace, "before"); n != 1 {
			return fmt.Errorf("the changed ConfigMap was reconciled %d times while paused, want once (before the pause)", n)
		}
		if n := s.Recorder.Count(s.Cluster, s.Namespace, "during"); n != 0 {
			return fmt.Errorf("the ConfigMap created while paused was reconciled %d times", n)
		}
		if _, err := s.Manager.GetCluster(ctx, s.Cluster); err != nil {
			return fmt.Errorf("GetCluster while paused: %w", err)
		}
		return pausedIs(true)()
	})

	s.SetPaused(t, false)
	fleettest.Eventually(t, 30*time.Second, pausedIs(false))
	s.Recorder.WaitFor(t, 2, s.Cluster, s.Namespace, "before")
	s.Recorder.WaitFor(t, 1, s.Cluster, s.Namespace, "during")
	fleettest.Consistently(t, 500*time.Millisecond, func() error {
		if n := s.Recorder.Count(s.Cluster, s.Namespace, "before"); n != 2 {
			return fmt.Errorf("the ConfigMap changed while paused was reconciled %d times in all, want twice (once before, once on resume)", n)
		}
		if n := s.Recorder.Count(s.Cluster, s.Namespace, "during"); n != 1 {
			return fmt.Errorf("the ConfigMap created while paused was reconciled %d times after the resume, want once", n)
		}
		return nil
	})
	if n := s.Tracker.Count(s.Cluster); n != 1 {
		t.Errorf("cluster %q was engaged %d times, want once: the pause rebuilt it", s.Cluster, n)
	}
	if s.MemberConfig != nil {
		if n := testbed.ListsServed(t, s.MemberConfig, "configmaps") - lists; n != 0 {
			t.Errorf("the member's API server served %v LISTs of ConfigMaps during the pause and the resume, want none: resuming relisted", n)
		}
	}
}

// Annotate returns a Scenario.SetPaused that sets PausedAnnotation "true" on
// obj, or removes it, with a merge patch through c.
func Annotate(c client.Client, obj client.Object) func(t testing.TB, paused bool) {
	return func(t testing.TB, paused bool) {
		t.Helper()
		patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
		a := obj.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		if paused {
			a[inventory.PausedAnnotation] = "true"
		} else {
			delete(a, inventory.PausedAnnotation)
		}
		obj.SetAnnotations(a)
		if err := c.Patch(context.Background(), obj, patch); err != nil {
			t.Fatal(err)
		}
	}
}
