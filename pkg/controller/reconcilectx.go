package controller

import (
	"context"
	"sync"
)

// withEngagement returns ctx, cancelled also when engaged ends, and what
// releases it (release; nil, which releases nothing, if engaged never ends). A reconcile ends with its cluster's engagement:
// a member declared disconnected, removed or replaced does not keep the
// worker that waits on it.
//
// It costs no registration with either context until something asks for
// Done or derives a context: a reconcile that reads its cluster's cache never
// does, and many workers reconciling one cluster would otherwise take the
// engagement's lock on every request to add and remove themselves.
//
// The context itself is the release handle: one allocation per reconcile, no
// closure besides it.
func withEngagement(ctx, engaged context.Context) (context.Context, *engagedContext) {
	if engaged.Done() == nil {
		return ctx, nil
	}
	c := &engagedContext{Context: ctx, engaged: engaged}
	return c, c
}

// engagedContext is a reconcile's context: its values and deadline are the
// reconcile's, and it is done when the reconcile's context or the
// engagement is. context.Cause reports the reconcile context's cause.
type engagedContext struct {
	context.Context // the reconcile's
	engaged         context.Context

	mu    sync.Mutex
	done  <-chan struct{} // made by the first Done
	stops []func() bool   // of the registrations Done made
}

var _ interface {
	AfterFunc(func()) func() bool
} = &engagedContext{}

func (c *engagedContext) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if c.engaged.Err() != nil {
		return context.Canceled
	}
	return nil
}

// Done closes when the reconcile's context or the engagement ends. The
// channel is made on the first call.
func (c *engagedContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		if c.Context.Done() == nil {
			c.done = c.engaged.Done()
		} else {
			ch := make(chan struct{})
			c.stops = c.register(func() { close(ch) })
			c.done = ch
		}
	}
	return c.done
}

// AfterFunc runs f once, when either context ends, unless stopped first. The
// context package uses it for contexts derived from this one, which are then
// cancelled without a goroutine of their own.
func (c *engagedContext) AfterFunc(f func()) func() bool {
	stops := c.register(f)
	return func() bool {
		stopped := true
		for _, stop := range stops {
			stopped = stop() && stopped
		}
		return stopped
	}
}

// register runs f once when the reconcile's context or the engagement ends.
func (c *engagedContext) register(f func()) []func() bool {
	var once sync.Once
	run := func() { once.Do(f) }
	return []func() bool{context.AfterFunc(c.Context, run), context.AfterFunc(c.engaged, run)}
}

// release drops what Done registered. Contexts derived from this one keep
// their own registrations until they are cancelled.
func (c *engagedContext) release() {
	if c == nil {
		return
	}
	c.mu.Lock()
	stops := c.stops
	c.stops = nil
	c.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}
