package controller

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// countingContext counts the registrations made on it through AfterFunc that
// are still live (neither stopped nor run).
type countingContext struct {
	context.Context
	mu   sync.Mutex
	live int
}

func (c *countingContext) AfterFunc(f func()) func() bool {
	c.mu.Lock()
	c.live++
	c.mu.Unlock()
	var once sync.Once
	end := func() { once.Do(func() { c.mu.Lock(); c.live--; c.mu.Unlock() }) }
	stop := context.AfterFunc(c.Context, func() { end(); f() })
	return func() bool {
		stopped := stop()
		if stopped {
			end()
		}
		return stopped
	}
}

// Value hides the embedded context's cancellation from the context package,
// so that registrations go through AfterFunc.
func (c *countingContext) Value(any) any { return nil }

func (c *countingContext) registrations() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live
}

func waitDone(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: context not done within 10s", what)
	}
}

type key struct{}

func TestReconcileContextEndsWithEngagement(t *testing.T) {
	engagedCtx, disengage := context.WithCancel(context.Background())
	defer disengage()
	parent, stopController := context.WithCancel(context.WithValue(context.Background(), key{}, "reconcile"))
	defer stopController()

	ctx, ec := withEngagement(parent, engagedCtx)
	defer ec.release()
	child, cancelChild := context.WithTimeout(ctx, time.Hour)
	defer cancelChild()
	if ctx.Value(key{}) != "reconcile" || child.Value(key{}) != "reconcile" {
		t.Errorf("the reconcile's values are lost: %v, %v", ctx.Value(key{}), child.Value(key{}))
	}
	if _, ok := ctx.Deadline(); ok {
		t.Error("a deadline appeared that the reconcile's context does not have")
	}
	if err := ctx.Err(); err != nil {
		t.Fatalf("Err before anything ended: %v", err)
	}
	disengage()
	waitDone(t, ctx, "the reconcile's context")
	waitDone(t, child, "a context derived from it")
	if err := ctx.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("Err after the engagement ended = %v, want context.Canceled", err)
	}
}

func TestReconcileContextEndsWithController(t *testing.T) {
	engagedCtx, disengage := context.WithCancel(context.Background())
	defer disengage()
	parent, stopController := context.WithCancel(context.Background())

	ctx, ec := withEngagement(parent, engagedCtx)
	defer ec.release()
	done := ctx.Done()
	stopController()
	waitDone(t, ctx, "the reconcile's context")
	if ctx.Done() != done {
		t.Error("Done returned another channel on the second call")
	}
	if err := ctx.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("Err after the controller stopped = %v, want context.Canceled", err)
	}
}

// Many workers reconcile the same cluster: a reconcile that never asks for
// Done registers nothing with the engagement's context (each registration
// takes that context's lock), and one that does lets go when it is released.
func TestReconcileContextRegistersOnlyWhenAsked(t *testing.T) {
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	engagedCtx := &countingContext{Context: base}
	parent, stop := context.WithCancel(context.Background())
	defer stop()

	ctx, ec := withEngagement(parent, engagedCtx)
	_ = ctx.Err()
	_ = ctx.Value(key{})
	if n := engagedCtx.registrations(); n != 0 {
		t.Errorf("a reconcile that did not ask for Done registered %d times with the engagement", n)
	}
	ec.release()

	ctx, ec = withEngagement(parent, engagedCtx)
	_ = ctx.Done()
	if n := engagedCtx.registrations(); n != 1 {
		t.Errorf("after Done: %d registrations with the engagement, want 1", n)
	}
	ec.release()
	if n := engagedCtx.registrations(); n != 0 {
		t.Errorf("after release: %d registrations with the engagement left, want 0", n)
	}
}

// Every reconcile looks up its cluster's engagement. With thousands of
// clusters engaging at start-up, the controller's lock is taken for writing
// thousands of times; the lookup must not queue behind those writers.
func TestEngagementLookupDoesNotWaitForWriters(t *testing.T) {
	c := &mcController[mcreconcile.Request]{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, _, err := c.engage(ctx, "member", nil); err != nil {
		t.Fatal(err)
	}
	found := make(chan context.Context, 1)
	c.mu.Lock()
	go func() { found <- c.engagement("member") }()
	select {
	case got := <-found:
		if got == nil {
			t.Error("the engaged cluster was not found")
		}
	case <-time.After(5 * time.Second):
		t.Error("the lookup did not answer within 5s while a writer held the controller's lock")
	}
	c.mu.Unlock()
	cancel()
	fleettest.Eventually(t, 5*time.Second, func() error {
		if c.engagement("member") != nil {
			return errors.New("the engagement is still found after it ended")
		}
		return nil
	})
}
