package fleet_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
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
	deadline := time.Now().Add(10 * time.Second)
	for e.Ready(nil) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the engine did not start within 10s")
		}
		time.Sleep(time.Millisecond)
	}

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
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := e.Ready(nil)
		if err == nil {
			break
		}
		if strings.Contains(err.Error(), "has not listed") {
			sawWaiting = true
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready 10s after start although the listing timeout is 300ms: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	if !sawWaiting {
		t.Error("readiness never waited for the provider's listing")
	}
}
