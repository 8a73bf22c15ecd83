package fleet_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// The readiness check scans every record; with 10,000 clusters it must not
// take the engine's lock exclusively, which would stall every reconciler's
// Get (read-locked) behind each probe of /readyz. It answers while readers
// hold the lock.
func TestReadyDoesNotWaitForReaders(t *testing.T) {
	e := fleet.New(fleet.Options{Health: fleet.HealthOptions{Disabled: true}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Start(ctx) }()
	defer func() { cancel(); <-done }()
	// A writer waiting for the lock (Start) would hold back any reader.
	fleettest.Eventually(t, 10*time.Second, func() error { return e.Ready(nil) })

	answered := make(chan error, 1)
	e.ReadLocked(func() {
		go func() { answered <- e.Ready(nil) }()
		select {
		case <-answered:
		case <-time.After(5 * time.Second):
			t.Error("Ready did not answer within 5s while a reader held the engine's lock")
		}
	})
}

// Readiness waits for the provider's first listing, but not for ever: a
// provider that never lists holds it back for ListingTimeout only.
func TestReadyWaitsForTheListingBounded(t *testing.T) {
	listed := make(chan struct{}) // never closed
	e := fleet.New(fleet.Options{Health: fleet.HealthOptions{Disabled: true}, Listed: listed, ListingTimeout: 300 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Start(ctx) }()
	defer func() { cancel(); <-done }()
	var sawWaiting bool
	fleettest.Eventually(t, 10*time.Second, func() error {
		err := e.Ready(nil)
		if err != nil && strings.Contains(err.Error(), "has not listed") {
			sawWaiting = true
		}
		return err
	})
	if !sawWaiting {
		t.Error("readiness never waited for the provider's listing")
	}
}

// A provider publishing thousands of clusters at start-up must not take the
// engine's lock exclusively for each (every attempt already started would
// wait for it, and each reconciler's Get behind it): SetMember of a new
// member, admitted at once, completes while a reader holds the lock.
func TestPublishingDoesNotWaitForReaders(t *testing.T) {
	e := fleet.New(fleet.Options{Health: fleet.HealthOptions{Disabled: true}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Start(ctx) }()
	defer func() { cancel(); <-done }()
	fleettest.Eventually(t, 10*time.Second, func() error { return e.Ready(nil) })

	// Its build waits for the engine's stop: the member stays starting.
	build := func(ctx context.Context) (cluster.Cluster, error) { <-ctx.Done(); return nil, ctx.Err() }
	published := make(chan struct{})
	e.ReadLocked(func() {
		go func() {
			e.SetMember(fleet.Member{Name: "c1", Hash: "1", Build: build})
			close(published)
		}()
		select {
		case <-published:
		case <-time.After(5 * time.Second):
			t.Error("SetMember did not return within 5s while a reader held the engine's lock")
		}
	})
	<-published
	if st, ok := e.State("c1"); !ok || st != fleet.StateStarting {
		t.Errorf("published member is %q (known: %v), want %q", st, ok, fleet.StateStarting)
	}
}
